"""`kiln --json serve --host 0.0.0.0` seen from another machine: a client in a network namespace of
its own, joined to this one by a veth pair (10.213.N.1 here, 10.213.N.2 there), runs the pip
command kiln printed and resolves kiln's packages from kiln and the rest from the upstream (a
local PyPI stand-in, tests/e2e/upstream.py, on 10.213.N.1). Without the printed --trusted-host,
pip skips the plain-http index. Needs root and iproute2's `ip` (skipped otherwise)."""

import ipaddress
import os
import re
import shlex
import shutil
import subprocess
import unittest

import upstream as upstream_mod
from test_last_mile import LastMileCase, pins_of, upstream_names


class ServeNetworkTest(LastMileCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root: it makes a network namespace and a veth pair")
        if not shutil.which("ip"):
            self.skipTest("needs iproute2's `ip` to make a network namespace")
        super().setUp()

    def ip(self, *args, check=True):
        proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
        if check:
            self.assertEqual(proc.returncode, 0, f"ip {' '.join(args)}: {proc.stderr}")
        return proc

    def network(self):
        """A namespace kiln-e2e-<pid> joined to this one by a veth pair; (namespace, host address,
        client address). Everything is removed at cleanup, whatever happened."""
        pid = os.getpid()
        used = self.ip("-4", "-o", "addr").stdout
        subnet = next((n for n in [pid % 200 + 20, *range(20, 250)] if f" 10.213.{n}." not in used), None)
        if subnet is None:
            self.skipTest("no free 10.213.N.0/24 subnet")
        host_addr, client_addr = f"10.213.{subnet}.1", f"10.213.{subnet}.2"
        name, host_if, client_if = f"kiln-e2e-{pid}", f"kh{pid}"[:15], f"kc{pid}"[:15]
        made = self.ip("netns", "add", name, check=False)
        if made.returncode != 0:
            self.skipTest(f"cannot make a network namespace here: {made.stderr.strip()}")
        self.addCleanup(self.ip, "netns", "del", name, check=False)
        made = self.ip("link", "add", host_if, "type", "veth", "peer", "name", client_if, check=False)
        if made.returncode != 0:
            self.skipTest(f"cannot make a veth pair here: {made.stderr.strip()}")
        self.addCleanup(self.ip, "link", "del", host_if, check=False)  # gone with the namespace, usually
        self.ip("link", "set", client_if, "netns", name)
        self.ip("addr", "add", f"{host_addr}/24", "dev", host_if)
        self.ip("link", "set", host_if, "up")
        for args in (("addr", "add", f"{client_addr}/24", "dev", client_if), ("link", "set", client_if, "up"),
                     ("link", "set", "lo", "up"), ("route", "add", "default", "via", host_addr)):
            self.ip("netns", "exec", name, "ip", *args)
        return name, host_addr, client_addr

    def test_the_printed_pip_command_works_from_another_host(self):
        cache = self.persistent_cache()
        netns, host_addr, client_addr = self.network()
        up = self.upstream(upstream_mod.pypi, host=host_addr)
        served = self.serve(cache, "--fallback-url", up.url, host_args=("--host", "0.0.0.0", "--port", "0"))
        port = served.port
        ready = served.ready
        self.assertIn("urls", ready)
        here = f"http://{host_addr}:{port}/"
        self.assertIn(here, ready["urls"])
        for url in ready["urls"]:
            host = re.match(r"http://\[?([^\]/]+?)\]?:\d+/$", url).group(1)
            self.assertFalse(ipaddress.ip_address(host).is_unspecified, ready["urls"])

        command = ready["install"]["default"]["pip"]
        args = self.command_args(command, ["pip", "install"])
        index = args[args.index("--index-url") + 1]
        netloc = re.match(r"http://([^/]+)/default/simple/$", index).group(1)
        printed_host = netloc.rsplit(":", 1)[0].strip("[]")
        self.assertFalse(ipaddress.ip_address(printed_host).is_loopback, command)
        self.assertEqual(netloc, f"{netloc.rsplit(':', 1)[0]}:{port}")
        self.assertEqual(args[args.index("--trusted-host") + 1], netloc, command)
        self.assertIn(f"http://{netloc}/", ready["urls"])
        self.assertIn(f"kiln: default: {command}\n", self.wait_log(served, f"kiln: default: {command}\n"))

        kiln_projects = self.kiln_projects(f"http://127.0.0.1:{port}/default/simple/")
        requested = set(pins_of(args)) | upstream_names(pins_of(args))
        in_netns = ("ip", "netns", "exec", netns)
        # The command for the address the client reaches this host at (the printed one when that
        # is it; else the same command with this address), then the printed one as it is (the
        # namespace routes every address of this host through the veth).
        candidates = [[a.replace(netloc, f"{host_addr}:{port}") for a in args]]
        if ipaddress.ip_address(printed_host).version == 4 and printed_host != host_addr:
            candidates.append(args)
        for run_args in candidates:
            run_index = run_args[run_args.index("--index-url") + 1]
            _, resolved = self.pip_resolve(run_args, prefix=in_netns)
            self.assertEqual(set(resolved), requested)
            self.assert_resolution(resolved, run_index, kiln_projects, [up], requested, shlex.join(run_args))
        # uv's command as printed (uv needs no flag for a plain-http index on another host).
        uv_args = self.command_args(ready["install"]["default"]["uv"], ["uv", "pip", "install"])
        self.assertNotIn("--trusted-host", uv_args)
        for run_args in [[a.replace(netloc, f"{host_addr}:{port}") for a in uv_args], uv_args][:len(candidates)]:
            _, compiled = self.uv_compile(run_args, prefix=in_netns)
            self.assertEqual(set(compiled), requested)
            self.assert_resolution(compiled, run_args[run_args.index("--index-url") + 1], kiln_projects, [up],
                                   requested, shlex.join(run_args))
        text = served.log.read_text()
        self.assertRegex(text, rf"kiln: {re.escape(client_addr)} GET /default/simple/causal-conv1d/ 200 ")
        self.assertRegex(text, rf"kiln: {re.escape(client_addr)} GET /default/simple/torch/ 307 ")
        self.assert_no_own_requests(up, set(kiln_projects) | {"kiln-wheels"})

        # Without --trusted-host pip will not use a plain-http index on another host.
        i = candidates[0].index("--trusted-host")
        untrusted = candidates[0][:i] + candidates[0][i + 2:]
        proc, _ = self.pip_resolve(untrusted, check=False, prefix=in_netns)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("not a trusted or secure host", proc.stdout + proc.stderr)


if __name__ == "__main__":
    unittest.main()
