"""The services the remote-cache and cluster tests start (tests/support/services.py), against the
real programs: Redis over raw RESP, nginx's WebDAV with curl-free HTTP, and a one-node Slurm
cluster running a job array. A missing program fails (scripts/install-deps installs them all)."""

import http.client
import os
import shutil
import socket
import sys
import tempfile
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import services  # noqa: E402


class ServiceTestCase(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="kiln-services-"))
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

    def start(self, cls, *args, **kwargs):
        """Starts a service, stopped at cleanup; a missing program fails the test saying so."""
        try:
            service = cls(self.tmp, *args, **kwargs)
        except services.ServiceMissing as e:
            raise self.failureException(str(e)) from None
        self.addCleanup(service.stop)
        return service

    def assert_gone(self, service):
        self.assertEqual(service.processes(), [], f"{service.name} left processes behind")


def resp(port, *commands):
    """Raw RESP over one connection: each command is a list of words; returns the raw reply
    bytes, read until every reply has arrived (one line each for the commands used here)."""
    payload = b""
    for words in commands:
        payload += b"*%d\r\n" % len(words)
        for w in words:
            w = w.encode() if isinstance(w, str) else w
            payload += b"$%d\r\n%s\r\n" % (len(w), w)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(payload)
        data = b""
        while data.count(b"\r\n") < len(commands):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


class RedisTest(ServiceTestCase):
    def test_set_get_over_raw_socket(self):
        redis = self.start(services.Redis)
        self.assertEqual(redis.url, f"redis://127.0.0.1:{redis.port}")
        self.assertEqual(resp(redis.port, ["SET", "kiln:key", "value-1"]), b"+OK\r\n")
        self.assertEqual(resp(redis.port, ["GET", "kiln:key"]), b"$7\r\nvalue-1\r\n")
        self.assertEqual(resp(redis.port, ["GET", "kiln:missing"]), b"$-1\r\n")
        # No persistence: nothing is written to disk, whatever happens.
        self.assertEqual(redis.command("CONFIG", "GET", "save"), [b"save", b""])
        self.assertEqual(redis.command("CONFIG", "GET", "appendonly"), [b"appendonly", b"no"])

    def test_password_is_required(self):
        redis = self.start(services.Redis, password="s3cret")
        self.assertTrue(resp(redis.port, ["GET", "k"]).startswith(b"-NOAUTH"))
        self.assertTrue(resp(redis.port, ["AUTH", "wrong"]).startswith(b"-WRONGPASS"))
        self.assertEqual(resp(redis.port, ["AUTH", "s3cret"], ["SET", "k", "v"], ["GET", "k"]),
                         b"+OK\r\n+OK\r\n$1\r\nv\r\n")
        with self.assertRaisesRegex(services.RedisError, "NOAUTH"):
            redis.command("GET", "k", password=None)
        self.assertEqual(redis.command("GET", "k"), b"v")

    def test_maxmemory_evicts_least_recently_used(self):
        redis = self.start(services.Redis, maxmemory="2mb")
        self.assertEqual(redis.command("CONFIG", "GET", "maxmemory-policy"),
                         [b"maxmemory-policy", b"allkeys-lru"])
        value = b"x" * 100_000
        for i in range(60):  # 6 MB into 2 MB: writes never fail, old keys go
            self.assertEqual(redis.command("SET", f"k{i}", value), "OK")
        kept = redis.command("DBSIZE")
        self.assertLess(kept, 30)
        self.assertGreater(kept, 0)
        self.assertEqual(redis.command("GET", "k59"), value)
        self.assertIsNone(redis.command("GET", "k0"))

    def test_kill_and_restart(self):
        redis = self.start(services.Redis)
        redis.command("SET", "k", "v")
        self.assertEqual(len(redis.processes()), 1)
        redis.kill()
        self.assert_gone(redis)
        with self.assertRaises(ConnectionRefusedError):
            resp(redis.port, ["PING"])
        redis.restart()
        self.assertEqual(resp(redis.port, ["PING"]), b"+PONG\r\n")
        self.assertIsNone(redis.command("GET", "k"), "a restarted Redis starts empty")
        redis.stop()
        self.assert_gone(redis)


class WebDavTest(ServiceTestCase):
    def request(self, dav, method, path, body=None, token=None):
        conn = http.client.HTTPConnection("127.0.0.1", dav.port, timeout=10)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        conn.request(method, "/cache/" + path, body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return r.status, r.headers, data

    def test_put_get_head_delete(self):
        dav = self.start(services.WebDav)
        self.assertEqual(dav.url, f"http://127.0.0.1:{dav.port}/cache/")
        blob = os.urandom(300_000)
        status, _, _ = self.request(dav, "PUT", "objects/ab/abcdef", blob)
        self.assertEqual(status, 201)  # parents made by create_full_put_path
        self.assertEqual((dav.root / "objects/ab/abcdef").read_bytes(), blob)
        status, _, data = self.request(dav, "GET", "objects/ab/abcdef")
        self.assertEqual((status, data), (200, blob))
        status, headers, data = self.request(dav, "HEAD", "objects/ab/abcdef")
        self.assertEqual((status, headers["Content-Length"], data), (200, str(len(blob)), b""))
        self.assertEqual(self.request(dav, "GET", "objects/ab/missing")[0], 404)
        self.assertEqual(self.request(dav, "HEAD", "nothing/here")[0], 404)
        self.assertEqual(self.request(dav, "PUT", "objects/ab/abcdef", b"new")[0], 204)
        self.assertEqual(self.request(dav, "GET", "objects/ab/abcdef")[2], b"new")
        # A test may corrupt an entry on disk; the server serves what is there.
        (dav.root / "objects/ab/abcdef").write_bytes(b"corrupt")
        self.assertEqual(self.request(dav, "GET", "objects/ab/abcdef")[2], b"corrupt")
        self.assertEqual(self.request(dav, "DELETE", "objects/ab/abcdef")[0], 204)
        self.assertEqual(self.request(dav, "GET", "objects/ab/abcdef")[0], 404)

    def test_token_is_required(self):
        dav = self.start(services.WebDav, token="tok123")
        self.assertEqual(self.request(dav, "PUT", "a/b", b"data")[0], 401)
        self.assertEqual(self.request(dav, "PUT", "a/b", b"data", token="other")[0], 401)
        self.assertFalse((dav.root / "a").exists())
        self.assertEqual(self.request(dav, "PUT", "a/b", b"data", token="tok123")[0], 201)
        self.assertEqual(self.request(dav, "GET", "a/b")[0], 401)
        self.assertEqual(self.request(dav, "HEAD", "a/b")[0], 401)
        self.assertEqual(self.request(dav, "GET", "a/b", token="tok123")[1:][1], b"data")

    def test_kill_leaves_nothing(self):
        dav = self.start(services.WebDav)
        self.assertGreaterEqual(len(dav.processes()), 2, "nginx's master and its worker")
        dav.kill()
        self.assert_gone(dav)
        with self.assertRaises(ConnectionRefusedError):
            self.request(dav, "GET", "x")
        dav.restart()
        self.assertEqual(self.request(dav, "GET", "x")[0], 404)
        dav.stop()
        self.assert_gone(dav)


JOB = """#!/bin/sh
date +%s.%N > start.$SLURM_ARRAY_TASK_ID
echo "$SLURM_ARRAY_TASK_ID $KILN_JOB_VALUE" > id.$SLURM_ARRAY_TASK_ID
sleep 2
date +%s.%N > end.$SLURM_ARRAY_TASK_ID
echo "task $SLURM_ARRAY_TASK_ID on $SLURM_CLUSTER_NAME"
[ "$SLURM_ARRAY_TASK_ID" != 3 ] || exit 3
"""


class SlurmTest(ServiceTestCase):
    def test_job_array_runs_oversubscribed(self):
        slurm = self.start(services.Slurm, cpus=8)
        self.assertEqual(slurm.env["SLURM_CONF"], str(slurm.conf))
        info = slurm.run("sinfo", "--noheader", "--format=%T %c").stdout.split()
        self.assertEqual(info, ["idle", "8"])
        tasks = slurm.sbatch_array(JOB, 4, env={"KILN_JOB_VALUE": "passed"})
        self.assertEqual([t.index for t in tasks], [0, 1, 2, 3])
        self.assertEqual([(t.state, t.exit_code) for t in tasks],
                         [("COMPLETED", 0)] * 3 + [("FAILED", 3)])
        job_dir = tasks[0].output.parent
        for t in tasks:
            self.assertEqual((job_dir / f"id.{t.index}").read_text(), f"{t.index} passed\n")
            self.assertEqual(t.output.read_text(), f"task {t.index} on kilntest\n")
        starts = [float((job_dir / f"start.{i}").read_text()) for i in range(4)]
        ends = [float((job_dir / f"end.{i}").read_text()) for i in range(4)]
        # Every task started before any ended: 4 ran at once on a node of fewer real cores.
        self.assertLess(max(starts), min(ends), f"starts {starts}, ends {ends}")
        self.assertGreater(len(slurm.processes()), 2)
        slurm.stop()
        self.assert_gone(slurm)

    def test_kill_restart_and_stop_with_jobs_running(self):
        slurm = self.start(services.Slurm, cpus=4)

        def running(job_id):
            return slurm.run("squeue", "--noheader", "--states=RUNNING", "--format=%i",
                             f"--jobs={job_id}").stdout.split()

        def sleeps():
            found = []
            for p in slurm.processes():
                try:
                    if Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"sleep\0"):
                        found.append(p)
                except OSError:
                    pass
            return found

        job_id, _ = slurm.submit_array("#!/bin/sh\nsleep 60\n", 2)
        services.wait_until(lambda: len(running(job_id)) == 2, 30, "2 tasks running")
        # The jobs carry the service's tag (so kill() finds them).
        services.wait_until(lambda: len(sleeps()) == 2, 15, "the 2 tasks' sleep among processes()")
        slurm.kill()  # a crash of every daemon: the jobs go too
        self.assert_gone(slurm)
        slurm.restart()
        self.assertEqual(slurm.run("squeue", "--noheader").stdout, "", "it starts with no job")
        job_id, _ = slurm.submit_array("#!/bin/sh\nsleep 60\n", 2)
        services.wait_until(lambda: len(running(job_id)) == 2, 30, "2 tasks running")
        started = time.monotonic()
        slurm.stop()  # scancel, then the daemons
        self.assertLess(time.monotonic() - started, 15)
        self.assert_gone(slurm)


if __name__ == "__main__":
    unittest.main()
