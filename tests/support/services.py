"""Real services for tests, started in a temporary directory on free loopback ports: Redis, nginx
serving a WebDAV directory, and a one-node Slurm cluster (munged, slurmctld, slurmd). Standard
library only. docs/scale.md says how each is configured and why.

    with Redis(tmp, password="pw") as redis:        # or: r = Redis(tmp); addCleanup(r.stop)
        redis.command("SET", "k", "v")
    dav = WebDav(tmp, token="t")                     # dav.url, dav.root
    slurm = Slurm(tmp, cpus=8)                       # slurm.env has SLURM_CONF
    tasks = slurm.sbatch_array("#!/bin/sh\\necho $SLURM_ARRAY_TASK_ID\\n", 4)

A binary that is missing raises ServiceMissing, whose message says to run scripts/install-deps.
Every process a service starts runs in a session of its own and carries the environment variable
KILN_SERVICE=<a unique tag> (so do Slurm's slurmstepd and the jobs); stop() and kill() end each
process group and then any process still in those sessions or carrying the tag, so nothing
outlives the test. processes() lists what is still running.
"""

import atexit
import ctypes
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

INSTALL_HINT = ("run scripts/install-deps (it installs redis-server, nginx, slurmctld, slurmd, "
                "munge)")
TERMINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                   "BOOT_FAIL", "DEADLINE", "PREEMPTED", "REVOKED", "SPECIAL_EXIT"}
_LIVE = set()


class ServiceMissing(RuntimeError):
    """A service's binary is not installed."""


class ServiceError(RuntimeError):
    """A service did not start, or a request to it failed."""


class RedisError(ServiceError):
    """An error reply from Redis; its text is the message ('NOAUTH Authentication required.')."""


def find_binary(name):
    """The path of an installed program, looking in the sbin directories too (daemons live there
    and a user's PATH may lack them)."""
    extra = ["/usr/local/sbin", "/usr/sbin", "/sbin"]
    path = shutil.which(name) or shutil.which(name, path=os.pathsep.join(extra))
    if not path:
        raise ServiceMissing(f"{name} is not installed: {INSTALL_HINT}")
    return path


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now (the service binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    """In the child before exec: SIGKILL when the test process dies (PR_SET_PDEATHSIG), so a
    crashed test run leaves no daemon; and a session of its own, so its group can be killed."""
    os.setsid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _service_pids(tag, sessions):
    """Processes whose environment has KILN_SERVICE=tag, or whose session is one of `sessions`
    (redis-server and nginx write their titles over the environment; nginx's workers stay in the
    master's session). Only those this user may read."""
    needle = f"KILN_SERVICE={tag}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                session = int(f.read().rsplit(b")", 1)[1].split()[3])
            if session in sessions:
                pids.append(int(entry))
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    pids.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return pids


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(predicate, timeout, what, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise ServiceError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class Service:
    """Common parts: a directory of its own, child processes started in sessions of their own
    (killed with their group) and tagged, stop() (SIGTERM, then SIGKILL), kill() (SIGKILL at
    once, for fault tests), and use as a context manager."""

    name = "service"

    def _choose_port(self):
        """One free port, for services that listen on one (Slurm chooses its own two)."""
        self.port = free_port()

    def __init__(self, tmpdir):
        self.dir = Path(tmpdir) / f"{self.name}-{uuid.uuid4().hex[:8]}"
        self.dir.mkdir(parents=True)
        self.tag = f"{self.name}-{uuid.uuid4().hex}"
        self.procs = []
        self.sessions = set()
        _LIVE.add(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def _spawn(self, args, log, env=None):
        full_env = dict(os.environ)
        full_env.update(env or {})
        full_env["KILN_SERVICE"] = self.tag
        with open(log, "ab") as out:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    env=full_env, cwd=self.dir, preexec_fn=_die_with_parent)
        proc.log = Path(log)
        self.procs.append(proc)
        self.sessions.add(proc.pid)
        return proc

    def _check_running(self, proc):
        if proc.poll() is not None:
            log = proc.log.read_text(errors="replace") if proc.log.exists() else ""
            raise ServiceError(f"{proc.args[0]} exited with {proc.returncode}:\n{log[-4000:]}")

    def processes(self):
        """Pids of processes this service started that are still running (not zombies)."""
        return [pid for pid in _service_pids(self.tag, self.sessions) if _alive(pid)]

    def _end(self, sig, grace):
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        # What left the group (Slurm's slurmstepd and jobs) or outlived its leader (an nginx worker).
        for _ in range(100):
            pids = self.processes()
            if not pids:
                # Forget the sessions: their numbers may be given to other processes later.
                self.sessions.clear()
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)
        self.procs = []

    def stop(self):
        """Ends every process of the service (SIGTERM, SIGKILL after 5 s). Safe to call twice."""
        self._end(signal.SIGTERM, 5)
        _LIVE.discard(self)

    def kill(self):
        """SIGKILL to every process at once, as a crash would (restart() brings it back)."""
        self._end(signal.SIGKILL, 5)

    def restart(self):
        """Kills the service and starts it again with the same configuration and port."""
        self.kill()
        _LIVE.add(self)
        self._start()

    def _start(self):
        raise NotImplementedError

    def _start_with_free_ports(self, choose_ports, attempts=3):
        """Picks ports and starts; another process may take a port between free_port() and the
        bind, so a start that fails is tried again with new ports."""
        for attempt in range(attempts):
            choose_ports()
            try:
                self._start()
                return
            except ServiceError:
                self._end(signal.SIGKILL, 2)
                if attempt == attempts - 1:
                    raise


@atexit.register
def _stop_all():
    for service in list(_LIVE):
        service.stop()


# -- Redis ---------------------------------------------------------------------------------------

def _resp_encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def _resp_read(f):
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise ServiceError(f"connection closed by Redis (read {line!r})")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RedisError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_resp_read(f) for _ in range(n)]
    raise ServiceError(f"unexpected reply from Redis: {line!r}")


def redis_command(port, *args, password=None, host="127.0.0.1", timeout=5):
    """Sends one command over a new connection (AUTH first when a password is given) and returns
    the reply: str for status, bytes for bulk strings, int, list or None; an error reply raises
    RedisError."""
    with socket.create_connection((host, port), timeout=timeout) as s, s.makefile("rb") as f:
        if password is not None:
            s.sendall(_resp_encode(["AUTH", password]))
            _resp_read(f)
        s.sendall(_resp_encode(args))
        return _resp_read(f)


class Redis(Service):
    """redis-server on 127.0.0.1:<free port>, no persistence (save "" and no AOF), its dir and log
    in its own directory; requirepass when a password is given; maxmemory (bytes or '1mb') with
    allkeys-lru eviction when given. .port, .password, .url (redis://127.0.0.1:PORT, no password
    in it: pass that separately)."""

    name = "redis"

    def __init__(self, tmpdir, password=None, maxmemory=None):
        super().__init__(tmpdir)
        self.binary = find_binary("redis-server")
        self.password = password
        self.maxmemory = maxmemory
        self.port = None
        self._start_with_free_ports(self._choose_port)

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def _write_config(self):
        lines = [f"port {self.port}", "bind 127.0.0.1", "protected-mode yes", "daemonize no",
                 'save ""', "appendonly no", f"dir {self.dir}", f"logfile {self.dir}/redis.log",
                 f"pidfile {self.dir}/redis.pid"]
        if self.password is not None:
            lines.append(f"requirepass {self.password}")
        if self.maxmemory is not None:
            lines += [f"maxmemory {self.maxmemory}", "maxmemory-policy allkeys-lru"]
        conf = self.dir / "redis.conf"
        conf.write_text("\n".join(lines) + "\n")
        return conf

    def _start(self):
        proc = self._spawn([self.binary, str(self._write_config())], self.dir / "stdout.log")

        def answers():
            self._check_running(proc)
            try:
                return self.command("PING") == "PONG"
            except (OSError, ServiceError):
                return False
        try:
            wait_until(answers, 15, f"redis-server to answer PING on port {self.port}")
        except ServiceError as e:
            log = self.dir / "redis.log"
            raise ServiceError(f"{e}\n{log.read_text()[-4000:] if log.exists() else ''}") from e

    def command(self, *args, password=...):
        """One command (with AUTH using .password unless password= says otherwise; None: no
        AUTH)."""
        return redis_command(self.port, *args,
                             password=self.password if password is ... else password)


# -- WebDAV (nginx) ------------------------------------------------------------------------------

NGINX_CONF = """\
daemon off;
master_process on;
worker_processes 1;
{user}
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log {dir}/access.log;
    client_body_temp_path {dir}/tmp/body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    default_type application/octet-stream;
    sendfile on;
    server {{
        listen 127.0.0.1:{port};
        root {dir}/data;
        location /cache/ {{
{auth}
            dav_methods PUT DELETE MKCOL;
            create_full_put_path on;
            dav_access user:rw group:r all:r;
            client_max_body_size 2g;
            autoindex off;
        }}
    }}
}}
"""


class WebDav(Service):
    """nginx (the foreground master and one worker, run as the current user) serving .root at
    .url = http://127.0.0.1:PORT/cache/ with GET/HEAD and WebDAV PUT/DELETE/MKCOL (parents of a PUT
    created, bodies up to 2 GiB). With a token, any request without 'Authorization: Bearer <token>'
    gets 401. .root is the directory on disk, for tests that corrupt or remove entries."""

    name = "webdav"

    def __init__(self, tmpdir, token=None):
        super().__init__(tmpdir)
        self.binary = find_binary("nginx")
        self.token = token
        self.root = self.dir / "data" / "cache"
        self.root.mkdir(parents=True)
        (self.dir / "tmp").mkdir()
        self.port = None
        self._start_with_free_ports(self._choose_port)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/cache/"

    def _write_config(self):
        auth = ""
        if self.token is not None:
            if any(c in self.token for c in '"\\;{}$\n\r '):
                raise ValueError("the token must be a plain word (it is written into nginx.conf)")
            auth = (f'            if ($http_authorization != "Bearer {self.token}") '
                    "{ return 401; }")
        # As root the workers would switch to 'nobody' and could not write a private tmpdir.
        user = "user root;" if os.geteuid() == 0 else ""
        conf = self.dir / "nginx.conf"
        conf.write_text(NGINX_CONF.format(dir=self.dir, port=self.port, auth=auth, user=user))
        return conf

    def _start(self):
        conf = self._write_config()
        proc = self._spawn([self.binary, "-p", str(self.dir), "-e", str(self.dir / "error.log"),
                            "-c", str(conf)], self.dir / "stdout.log")

        def answers():
            self._check_running(proc)
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"HEAD / HTTP/1.0\r\n\r\n")
                    return s.recv(16).startswith(b"HTTP/")
            except OSError:
                return False
        try:
            wait_until(answers, 15, f"nginx to answer on port {self.port}")
        except ServiceError as e:
            log = self.dir / "error.log"
            raise ServiceError(f"{e}\n{log.read_text()[-4000:] if log.exists() else ''}") from e


# -- Slurm ---------------------------------------------------------------------------------------

SLURM_CONF = """\
ClusterName=kilntest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/run/slurmctld.pid
SlurmdPidFile={dir}/run/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
PlugStackConfig={dir}/plugstack.conf
MailProg=/bin/true
# No cgroups here: processes are tracked through /proc, tasks are not bound to cores.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
# Start a submitted array at the next scheduling pass, not up to 3 s later.
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# The node declares {cpus} CPUs whatever the machine has: slurmd takes the configured numbers
# (config_overrides), so {cpus} one-CPU tasks run at once on fewer cores.
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=2
InactiveLimit=0
MinJobAge=600
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=kiln Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


class ArrayTask:
    """One task of a finished job array: index, state (COMPLETED, FAILED, ...), exit_code (the
    script's status; -N when signal N ended it) and output (its stdout and stderr file)."""

    def __init__(self, index, state, exit_code, output):
        self.index, self.state, self.exit_code, self.output = index, state, exit_code, Path(output)

    def __repr__(self):
        return f"ArrayTask({self.index}, {self.state}, exit {self.exit_code}, {self.output})"


def _fields(line):
    out = {}
    for word in line.split():
        key, sep, value = word.partition("=")
        if sep:
            out[key] = value
    return out


class Slurm(Service):
    """A one-node Slurm cluster: munged with a key, socket and seed of its own, slurmctld and
    slurmd in the foreground (-D) with a generated slurm.conf on free ports, the node declaring
    `cpus` CPUs. .env is os.environ plus SLURM_CONF (every Slurm command needs it); .conf is its
    path; run() runs a Slurm command; sbatch_array() submits a job array and waits for it
    (submit_array() and array_tasks() are its two halves)."""

    name = "slurm"

    def __init__(self, tmpdir, cpus=8):
        super().__init__(tmpdir)
        self.cpus = cpus
        self.bin = {n: find_binary(n) for n in
                    ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo",
                     "scontrol", "scancel")}
        self.host = socket.gethostname().split(".")[0]
        # munged wants its socket's directory searchable by everyone and its key's not writable
        # by others; the directory a test made with mkdtemp is 0700.
        self.dir.chmod(0o755)
        for sub in ("state", "spool", "run", "munge", "jobs"):
            (self.dir / sub).mkdir()
        (self.dir / "run").chmod(0o755)
        (self.dir / "munge").chmod(0o700)
        (self.dir / "plugstack.conf").write_text("")
        self.munge_socket = self.dir / "run" / "munge.socket"
        self.conf = self.dir / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf), KILN_SERVICE=self.tag)
        self._jobs = 0
        self._recover_state = False
        subprocess.run([self.bin["mungekey"], "--create", "--bits=1024",
                        f"--keyfile={self.dir / 'munge' / 'munge.key'}"],
                       check=True, capture_output=True)
        self.ctld_port = self.slurmd_port = None
        self._start_with_free_ports(self._choose_ports)

    def _choose_ports(self):
        self.ctld_port = free_port()
        self.slurmd_port = free_port()
        while self.slurmd_port == self.ctld_port:
            self.slurmd_port = free_port()

    def _write_config(self):
        user = pwd.getpwuid(os.geteuid()).pw_name
        self.conf.write_text(SLURM_CONF.format(
            host=self.host, ctld_port=self.ctld_port, slurmd_port=self.slurmd_port, user=user,
            munge_socket=self.munge_socket, dir=self.dir, cpus=self.cpus))

    def _start(self):
        self._write_config()
        for stale in (self.munge_socket, self.dir / "run" / "munge.socket.lock"):
            stale.unlink(missing_ok=True)
        munged = self._spawn([self.bin["munged"], "--foreground", f"--socket={self.munge_socket}",
                              f"--key-file={self.dir / 'munge' / 'munge.key'}",
                              f"--pid-file={self.dir / 'run' / 'munged.pid'}",
                              f"--log-file={self.dir / 'munged.log'}",
                              f"--seed-file={self.dir / 'munge' / 'munged.seed'}"]
                             + (["--force"] if os.geteuid() == 0 else []),
                             self.dir / "munged.out")

        def munge_ready():
            self._check_running(munged)
            return self.munge_socket.exists()
        wait_until(munge_ready, 15, "munged to create its socket")
        # -c: no job from the saved state; -i: recover it, ignoring what a crash left half-written.
        state = "-i" if self._recover_state else "-c"
        ctld = self._spawn([self.bin["slurmctld"], "-D", state, "-f", str(self.conf)],
                           self.dir / "slurmctld.out", env=self.env)
        slurmd = self._spawn([self.bin["slurmd"], "-D", "-f", str(self.conf), "-N", self.host],
                             self.dir / "slurmd.out", env=self.env)

        def node_idle():
            self._check_running(munged)
            self._check_running(ctld)
            self._check_running(slurmd)
            out = self.run("sinfo", "--noheader", "--format=%T", check=False)
            return out.returncode == 0 and out.stdout.strip() == "idle"
        try:
            wait_until(node_idle, 30, f"node {self.host} to be idle in sinfo", interval=0.2)
        except ServiceError as e:
            logs = "".join(f"\n--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                           for p in sorted(self.dir.glob("*.out")) + sorted(self.dir.glob("*.log")))
            raise ServiceError(f"{e}{logs}") from e

    def run(self, *args, check=True, env=None, timeout=30):
        """Runs a Slurm command (sinfo, squeue, scontrol, ...) against this cluster."""
        name = args[0]
        cmd = [self.bin.get(name) or find_binary(name), *args[1:]]
        proc = subprocess.run(cmd, env=dict(self.env, **(env or {})), capture_output=True,
                              text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise ServiceError(f"{' '.join(args)} exited with {proc.returncode}:\n{proc.stderr}")
        return proc

    def submit_array(self, script_text, n, env=None, args=()):
        """Submits script_text as a job array of n tasks (--array=0-(n-1), one CPU each, a new
        directory under jobs/ as working directory, task i's output in <that>/i.out); returns
        (job id, that directory) at once. env is added to the job's environment."""
        self._jobs += 1
        job_dir = self.dir / "jobs" / str(self._jobs)
        job_dir.mkdir()
        script = job_dir / "job.sh"
        script.write_text(script_text)
        script.chmod(0o755)
        out = self.run("sbatch", "--parsable", f"--array=0-{n - 1}", "--ntasks=1",
                       "--cpus-per-task=1", f"--chdir={job_dir}", f"--output={job_dir}/%a.out",
                       f"--job-name=kiln-{self._jobs}", *args, str(script), env=env)
        return out.stdout.strip().split(";")[0], job_dir

    def array_tasks(self, job_id, job_dir):
        """{index: ArrayTask} for the tasks of a job array that have finished."""
        shown = self.run("scontrol", "--oneliner", "show", "job", job_id)
        tasks = {}
        for line in shown.stdout.splitlines():
            f = _fields(line)
            if f.get("ArrayTaskId", "").isdigit() and f.get("JobState") in TERMINAL_STATES:
                status, _, sig = f.get("ExitCode", "0:0").partition(":")
                code = -int(sig) if sig and int(sig) else int(status)
                index = int(f["ArrayTaskId"])
                tasks[index] = ArrayTask(index, f["JobState"], code, job_dir / f"{index}.out")
        return tasks

    def sbatch_array(self, script_text, n, env=None, timeout=120, args=()):
        """submit_array(), then waits until all n tasks have finished (polling scontrol; sbatch
        --wait polls every few seconds) and returns their ArrayTasks in index order. Past
        timeout the array is cancelled and ServiceError raised."""
        job_id, job_dir = self.submit_array(script_text, n, env, args)

        def finished():
            tasks = self.array_tasks(job_id, job_dir)
            return [tasks[i] for i in range(n)] if len(tasks) == n else None
        try:
            return wait_until(finished, timeout, f"job array {job_id} to finish", interval=0.2)
        except ServiceError:
            self.run("scancel", job_id, check=False)
            raise

    def restart(self, recover_state=False):
        """Kills every daemon (and so every job) and starts them again on the same ports. By
        default the controller starts with no job; recover_state=True has it read its saved state,
        as after a real crash (which jobs come back then depends on when it last saved)."""
        self._recover_state = recover_state
        try:
            super().restart()
        finally:
            self._recover_state = False

    def stop(self):
        """Cancels every job, then ends slurmd, slurmctld and munged (and anything they left)."""
        if any(p.poll() is None for p in self.procs):
            jobs = self.run("squeue", "--noheader", "--format=%A", check=False).stdout.split()
            if jobs:
                self.run("scancel", *sorted(set(jobs)), check=False)
                # Daemons told to stop while they end jobs take seconds longer to go.
                try:
                    wait_until(lambda: not self.run("squeue", "--noheader", check=False).stdout,
                               10, "the cancelled jobs to end", interval=0.1)
                except ServiceError:
                    pass
        super().stop()
