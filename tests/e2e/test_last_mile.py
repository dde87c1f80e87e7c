"""The last mile (issue 32): `kiln serve` is one index URL that installs everything. kiln answers
its own names itself (an empty page where a target has none of their files) and redirects every
other name (307, no-store) to the target's upstream: the `[torch] index-url` for torch and torch's
own requirements, else the fallback index. The exact pip and uv commands `kiln --json serve`,
`kiln doctor`, scripts/run and docs/serve.md print resolve kiln's packages from kiln and the rest
from a local PyPI stand-in (tests/e2e/upstream.py), install into fresh environments, and work
again without any network from what `pip download` fetched. Real torch is never downloaded: the
upstream's torch is a stand-in of a kilobyte."""

import base64
import http.client
import http.server
import itertools
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
import tomllib
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

import upstream as upstream_mod
from kilntest import KILN, SHARED_CACHE, SOURCE_DIR, KilnTestCase
from upstream import normalize

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
OWN = ("causal-conv1d", "fla-core", "flash-linear-attention")
UPSTREAM_NAMES = {"torch", "packaging", "ninja", "einops", "transformers"}


def upstream_names(pins):
    """The upstream projects installing `pins` takes: mamba-ssm's wheels, when the persistent cache
    has them, need more of the stand-in PyPI."""
    return UPSTREAM_NAMES | (set(upstream_mod.MAMBA_SSM_NEEDS) if "mamba-ssm" in pins else set())

PY = f"cp{sys.version_info.major}{sys.version_info.minor}"
DOCTOR_TARGET = f"cu130-torch2.11-{PY}-sm90"  # what doctor names an H200 with torch 2.11.0 (CUDA 13.0)
H200 = "NVIDIA H200:9.0"
# uv pip options that take a value (the rest of `uv pip install ARGS` are flags or requirements).
UV_VALUE_OPTIONS = {"--index-url", "-i", "--extra-index-url", "--index", "--default-index", "--find-links",
                    "-f", "--python", "-p", "--constraint", "-c", "--override", "--index-strategy",
                    "--keyring-provider", "--allow-insecure-host", "--trusted-host", "--python-version",
                    "--python-platform", "--prerelease", "--resolution", "--exclude-newer", "--target",
                    "--prefix", "--requirement", "-r", "--config-setting", "-C", "--cache-dir"}


def http_get(url, headers=None):
    """(status, headers (lowercase names), body) of one GET, redirects not followed."""
    u = urllib.parse.urlsplit(url)
    headers = dict(headers or {})
    if u.username is not None or u.password is not None:
        cred = f"{urllib.parse.unquote(u.username or '')}:{urllib.parse.unquote(u.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(cred.encode()).decode()
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.request("GET", u.path + (f"?{u.query}" if u.query else ""), headers=headers)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def pins_of(args):
    """{normalised name: version or None} of the requirement arguments of an install command."""
    out = {}
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a.startswith("-"):
            skip = a in UV_VALUE_OPTIONS and "=" not in a
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?(?:==([^\s;,]+))?.*", a)
        if m:
            out[normalize(m.group(1))] = m.group(2)
    return out


def split_uv_args(args):
    """(options, requirements) of `uv pip install`'s arguments."""
    opts, reqs = [], []
    it = iter(args)
    for a in it:
        if a.startswith("-"):
            opts.append(a)
            if a in UV_VALUE_OPTIONS and "=" not in a:
                opts.append(next(it))
        else:
            reqs.append(a)
    return opts, reqs


def parse_compiled(text):
    """{normalised name: (version, {sha256, …})} of `uv pip compile --generate-hashes` output."""
    pins, current = {}, None
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)", line)
        if m:
            current = normalize(m.group(1))
            pins[current] = (m.group(2), set())
        for h in re.findall(r"--hash=sha256:([0-9a-f]{64})", line):
            if current:
                pins[current][1].add(h)
    return pins


def site_packages(env_dir):
    return next(Path(env_dir).glob("lib/python3*/site-packages"))


def distributions(env_dir):
    """{normalised name: (version, kiln.json present)} installed in a virtual environment."""
    out = {}
    for info in site_packages(env_dir).glob("*.dist-info"):
        meta = (info / "METADATA").read_text(errors="replace")
        name = re.search(r"(?m)^Name: *(\S+)", meta).group(1)
        version = re.search(r"(?m)^Version: *(\S+)", meta).group(1)
        out[normalize(name)] = (version, (info / "kiln.json").is_file())
    return out


def shell_commands(text, prefixes):
    """Command lines of `text` (continuation lines joined, a `$ ` prompt dropped) that start with
    one of `prefixes` after leading blanks; each from its prefix to the line's end."""
    text = re.sub(r"\\\\?\n[ \t]*", " ", text)
    out = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("$ "):
            s = s[2:]
        for p in prefixes:
            i = s.find(p)
            if i >= 0 and (i == 0 or s[i - 1] in " \t:"):
                out.append(s[i:].rstrip())
                break
    return out


def placeholder(arg):
    """An argument a reader fills in (`<pkg>`, `…`, `$VAR`), not one to run as it is."""
    return bool(re.search(r"…|\.\.\.|\$|^<|>$", arg))


class Served:
    def __init__(self, ready, proc, log):
        self.ready, self.proc, self.log = ready, proc, log
        self.base = ready["url"]
        self.port = int(re.search(r":(\d+)/$", self.base).group(1))

    def index(self, target):
        return f"{self.base}{target}/simple/"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=10)


class LastMileCase(KilnTestCase):
    def setUp(self):
        super().setUp()
        self.counter = itertools.count()

    # --- servers ------------------------------------------------------------------------------

    def persistent_cache(self):
        """The persistent cache with this checkout's causal-conv1d, fla-core and
        flash-linear-attention for the default target (as test_serve.py: hits after a machine's
        first run)."""
        self.kiln("--cache", str(SHARED_CACHE), "build", *OWN, check=0, timeout=3000)
        return SHARED_CACHE

    def upstream(self, make=upstream_mod.pypi, **kw):
        up = make(**kw)
        self.addCleanup(up.stop)
        return up

    def kiln_env(self, env=None):
        full = dict(os.environ)
        full.pop("KILN_MANIFESTS", None)
        for k in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
            full.pop(k, None)
        full["PIP_CONFIG_FILE"] = os.devnull
        full.update(env or {})
        return full

    def serve(self, cache, *args, env=None, cwd=None, host_args=("--port", "0")):
        """`kiln --json serve` on `cache`, stopped at cleanup: its ready line, process and stderr."""
        log = self.tmp / f"serve-{next(self.counter)}.log"
        with open(log, "w") as err:
            proc = subprocess.Popen([KILN, "--cache", str(cache), "--json", "serve", *host_args, *args],
                                    stdout=subprocess.PIPE, stderr=err, text=True, cwd=cwd or self.project,
                                    env=self.kiln_env(env))

        def stop():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=10)
            proc.stdout.close()
        self.addCleanup(stop)
        readable, _, _ = select.select([proc.stdout], [], [], 60)
        line = proc.stdout.readline() if readable else ""
        self.assertTrue(line, f"kiln --json serve {' '.join(args)}: no ready line\n{log.read_text()}")
        return Served(json.loads(line), proc, log)

    def wait_log(self, served, text, seconds=5):
        deadline = time.time() + seconds
        while text not in served.log.read_text() and time.time() < deadline:
            time.sleep(0.05)
        return served.log.read_text()

    # --- clients ------------------------------------------------------------------------------

    def client_env(self, **extra):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PIP_", "UV_")) and k.lower() not in
               ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
        env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1",
                   PIP_CACHE_DIR=str(self.tmp / "pip-cache"), UV_CACHE_DIR=str(self.tmp / "uv-cache"),
                   UV_NO_CONFIG="1", UV_PYTHON_DOWNLOADS="never")
        env.update(extra)
        return env

    def run_client(self, argv, check=True, env=None, timeout=300):
        proc = subprocess.run(argv, capture_output=True, text=True, env=env or self.client_env(),
                              timeout=timeout)
        if check:
            self.assertEqual(proc.returncode, 0, f"{shlex.join(argv)}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def command_args(self, command, head):
        args = shlex.split(command)
        self.assertEqual(args[:len(head)], head, command)
        return args[len(head):]

    def pip_resolve(self, install_args, check=True, prefix=()):
        """`pip install ARGS --dry-run --ignore-installed --report R` with the tools' Python:
        (process, {name: {"version", "url", "sha256s"}})."""
        report = self.tmp / f"report-{next(self.counter)}.json"
        argv = [*prefix, sys.executable, "-m", "pip", "install", *install_args, "--dry-run", "--ignore-installed",
                "--report", str(report)]
        proc = self.run_client(argv, check=check)
        resolved = {}
        if proc.returncode == 0:
            for item in json.loads(report.read_text())["install"]:
                info = item["download_info"]
                archive = info.get("archive_info", {})
                sha = archive.get("hashes", {}).get("sha256")
                if not sha and archive.get("hash", "").startswith("sha256="):
                    sha = archive["hash"][len("sha256="):]
                resolved[normalize(item["metadata"]["name"])] = {
                    "version": item["metadata"]["version"], "url": info["url"],
                    "sha256s": {sha} if sha else set()}
        return proc, resolved

    def uv_compile(self, install_args, check=True, prefix=()):
        """`uv pip install ARGS` as `uv pip compile --generate-hashes` on the same options, the
        requirements read from a file: (process, {name: {"version", "url": None, "sha256s"}})."""
        opts, reqs = split_uv_args(install_args)
        req_in = self.tmp / f"req-{next(self.counter)}.in"
        req_in.write_text("".join(r + "\n" for r in reqs))
        argv = [*prefix, self.tool("uv"), "pip", "compile", "--generate-hashes", "--no-header", "--python", sys.executable,
                *opts, str(req_in)]
        proc = self.run_client(argv, check=check)
        resolved = {name: {"version": v, "url": None, "sha256s": h}
                    for name, (v, h) in parse_compiled(proc.stdout).items()}
        return proc, resolved

    def pip_venv(self, name):
        venv = self.tmp / name
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True,
                       env=self.client_env(), timeout=300)
        return venv

    def uv_venv(self, name):
        venv = self.tmp / name
        self.run_client([self.tool("uv"), "venv", "--python", sys.executable, str(venv)])
        return venv

    # --- what kiln serves ---------------------------------------------------------------------

    def page_json(self, url):
        req = urllib.request.Request(url, headers={"Accept": JSON_TYPE})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def kiln_projects(self, index):
        """{project: {filename: sha256}} of every project with files on a target's index."""
        out = {}
        for p in self.page_json(index)["projects"]:
            name = normalize(p["name"])
            files = {f["filename"]: f["hashes"]["sha256"] for f in self.page_json(f"{index}{name}/")["files"]}
            if files:
                out[name] = files
        return out

    def assert_resolution(self, resolved, index, kiln_projects, upstreams, requested, how):
        """Every package kiln has files of comes from kiln (its URL on kiln's index, kiln's sha256),
        every other one from the upstream that offers it (its URL there, its sha256)."""
        for name in requested:
            self.assertIn(name, resolved, f"{how}: {name} not resolved: {resolved}")
        for name, r in resolved.items():
            if name in kiln_projects:
                files = kiln_projects[name]
                self.assertTrue(r["sha256s"], f"{how}: no hash for {name}")
                self.assertLessEqual(r["sha256s"], set(files.values()),
                                     f"{how}: {name} {r['version']} ({r['url']}) is not kiln's wheel")
                if r["url"] is not None:
                    self.assertTrue(r["url"].startswith(f"{index}{name}/"), f"{how}: {name} from {r['url']}")
                    self.assertIn(urllib.parse.unquote(r["url"].rsplit("/", 1)[1]), files)
            else:
                owners = [u for u in upstreams if u.sha256s(name)]
                self.assertTrue(owners, f"{how}: {name} {r['version']} is neither kiln's nor an upstream's")
                up = owners[0]
                self.assertTrue(r["sha256s"], f"{how}: no hash for {name}")
                self.assertLessEqual(r["sha256s"], up.sha256s(name),
                                     f"{how}: {name} {r['version']} ({r['url']}) is not {up.url}'s file")
                if r["url"] is not None:
                    self.assertTrue(r["url"].startswith(f"{up.base}files/"), f"{how}: {name} from {r['url']}")

    def assert_no_own_requests(self, up, own):
        asked = set(up.project_requests()) & set(own)
        self.assertEqual(asked, set(), f"the upstream {up.url} was asked for kiln's own names")

    def dist_info(self, env_dir, project):
        dist = re.sub(r"[-_.]+", "_", project)
        found = list(site_packages(env_dir).glob(f"{dist}-*.dist-info"))
        self.assertEqual(len(found), 1, f"{project} in {env_dir}: {found}")
        return found[0]

    def default_pins(self, served):
        """The default target's install commands: (pip args, uv args, {project: version})."""
        install = served.ready["install"]["default"]
        index = served.index("default")
        pip_args = self.command_args(install["pip"], ["pip", "install"])
        uv_args = self.command_args(install["uv"], ["uv", "pip", "install"])
        self.assertEqual(pip_args[:2], ["--index-url", index], install["pip"])
        self.assertEqual(uv_args[:2], ["--index-url", index], install["uv"])
        return pip_args, uv_args, pins_of(pip_args)


class LastMileTest(LastMileCase):
    # --- (a) the exact commands `kiln --json serve` prints --------------------------------------

    def test_serve_install_commands_resolve_kiln_packages_from_kiln_and_the_rest_upstream(self):
        cache = self.persistent_cache()
        up = self.upstream()
        served = self.serve(cache, "--fallback-url", up.url)
        ready = served.ready
        for key in ("url", "cache", "indexes", "install"):
            self.assertIn(key, ready)
        self.assertEqual(ready["indexes"]["default"], served.index("default"))
        self.assertLessEqual(set(ready["install"]), set(ready["indexes"]))
        for target, cmds in ready["install"].items():
            self.assertEqual(sorted(cmds), ["pip", "uv"], target)
            for tool in ("pip", "uv"):
                self.assertIn(f"kiln: {target}: {cmds[tool]}\n",
                              self.wait_log(served, f"kiln: {target}: {cmds[tool]}\n"))
        index = served.index("default")
        kiln_projects = self.kiln_projects(index)
        for p in OWN:
            self.assertIn(p, kiln_projects)
        pip_args, uv_args, pins = self.default_pins(served)
        # Every project the target has files of, pinned to its served version; nothing else.
        self.assertEqual(set(pins), set(kiln_projects), pip_args)
        self.assertEqual(pins_of(uv_args), pins)
        for name, version in pins.items():
            self.assertTrue(any(f.split("-")[1] == version for f in kiln_projects[name]), (name, version))
        self.assertEqual(pip_args[2:], [f"{n}=={v}" for n, v in pins.items()])
        self.assertEqual(uv_args[2:], pip_args[2:])
        self.assertNotIn("--trusted-host", pip_args)  # loopback
        requested = set(pins) | upstream_names(pins)

        _, resolved = self.pip_resolve(pip_args)
        self.assertEqual(set(resolved), requested)
        self.assert_resolution(resolved, index, kiln_projects, [up], requested, "pip")
        self.assertEqual(resolved["torch"]["version"], "2.11.1")  # torch==2.11.*, upstream's newest
        _, compiled = self.uv_compile(uv_args)
        self.assertEqual(set(compiled), requested)
        self.assert_resolution(compiled, index, kiln_projects, [up], requested, "uv")
        self.assertEqual({n: r["version"] for n, r in compiled.items()},
                         {n: r["version"] for n, r in resolved.items()})

        self.assert_no_own_requests(up, set(kiln_projects) | {"kiln-wheels"})
        self.assertLessEqual(UPSTREAM_NAMES, set(up.project_requests()))
        text = served.log.read_text()
        self.assertRegex(text, r"kiln: 127\.0\.0\.1 GET /default/simple/torch/ 307 ")
        self.assertRegex(text, r"kiln: 127\.0\.0\.1 GET /default/simple/causal-conv1d/ 200 ")

    def test_requirement_forms_build_what_pip_picks_from_kiln(self):
        """Issue 51: a package argument is a requirement as pip reads it (extras, a marker, the
        parenthesised form): `kiln build FORM` builds the very wheel pip's resolver picks from
        kiln's index for the same string, and nothing where the marker is false for the target."""
        cache = self.persistent_cache()
        up = self.upstream()
        served = self.serve(cache, "--fallback-url", up.url)
        index = served.index("default")
        forms = {
            "causal-conv1d[dev]": "causal-conv1d",  # an extra it does not provide: pip warns
            "flash-linear-attention[conv1d]": "flash-linear-attention",  # one it does
            'causal-conv1d; python_version>"3"': "causal-conv1d",
            "causal-conv1d (>=1.6)": "causal-conv1d",
            'causal-conv1d; python_version<"3"': None,
        }
        for form, name in forms.items():
            with self.subTest(form=form):
                built = self.kiln("--cache", str(cache), "--json", "build", form, check=0,
                                  timeout=900)
                items = json.loads(built.stdout)["items"]
                proc, resolved = self.pip_resolve(["--index-url", index, form])
                if name is None:
                    self.assertEqual(items, [])
                    self.assertIn("nothing to build", built.stderr)
                    self.assertIn("its marker is false there", built.stderr)
                    self.assertEqual(resolved, {}, proc.stderr)
                    self.assertIn("Ignoring causal-conv1d", proc.stdout + proc.stderr)
                    continue
                self.assertEqual([normalize(i["package"]) for i in items], [name])
                picked = urllib.parse.unquote(resolved[name]["url"].rsplit("/", 1)[-1].split("#")[0])
                self.assertEqual(Path(items[0]["wheel"]).name, picked)
                extra_warning = "does not provide the extra 'dev'"
                self.assertEqual(extra_warning in built.stderr, form.endswith("[dev]"), built.stderr)
                self.assertEqual(extra_warning in proc.stdout + proc.stderr, form.endswith("[dev]"))
                if "[conv1d]" in form:
                    self.assertIn("causal-conv1d", resolved)  # the extra's requirement, from kiln

    def test_serve_install_commands_install_into_fresh_environments(self):
        cache = self.persistent_cache()
        up = self.upstream()
        served = self.serve(cache, "--fallback-url", up.url)
        install = served.ready["install"]["default"]
        _, _, pins = self.default_pins(served)
        expected = {**{n: v for n, v in pins.items()}, "torch": "2.11.1", "packaging": "25.0",
                    "ninja": "1.13.0", "einops": "0.8.1", "transformers": "5.6.2"}
        if "mamba-ssm" in pins:
            expected.update(upstream_mod.MAMBA_SSM_NEEDS)

        # pip, the exact command, in a fresh venv.
        venv = self.pip_venv("pip-venv")
        args = self.command_args(install["pip"], ["pip", "install"])
        self.run_client([str(venv / "bin" / "python"), "-m", "pip", "install", *args])
        got = distributions(venv)
        for name in ("pip", "setuptools"):
            got.pop(name, None)
        # The venv's own setuptools already meets mamba-ssm's setuptools>=61 for pip.
        self.assertEqual({n: v for n, (v, _) in got.items()},
                         {n: v for n, v in expected.items() if n != "setuptools"})
        # The exact uv command in a fresh uv venv, found through VIRTUAL_ENV.
        uv_venv = self.uv_venv("uv-venv")
        uv_args = self.command_args(install["uv"], ["uv", "pip", "install"])
        self.run_client([self.tool("uv"), "pip", "install", *uv_args],
                        env=self.client_env(VIRTUAL_ENV=str(uv_venv)))
        uv_got = distributions(uv_venv)
        self.assertEqual({n: v for n, (v, _) in uv_got.items()}, expected)
        for env_dir in (venv, uv_venv):
            for project in pins:
                self.assertTrue((self.dist_info(env_dir, project) / "kiln.json").is_file(), (env_dir, project))
            for project in UPSTREAM_NAMES:
                self.assertFalse((self.dist_info(env_dir, project) / "kiln.json").exists())
        self.assertEqual((site_packages(uv_venv) / "torch" / "version.py").read_text().splitlines()[0],
                         '__version__ = "2.11.1"')
        self.assert_no_own_requests(up, set(pins) | {"kiln-wheels"})

    # --- (b) kiln doctor's next commands --------------------------------------------------------

    def doctor_python(self):
        """A venv (no pip) with the upstream's torch 2.11.0 stand-in: CUDA 13.0 in torch/version.py."""
        venv = self.tmp / "doctor-venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        wheel = upstream_mod.torch_wheel("2.11.0", "13.0").write(self.tmp)
        with zipfile.ZipFile(wheel) as z:
            z.extractall(site_packages(venv))
        return venv / "bin" / "python"

    def doctor_next(self, python, server):
        from test_doctor import stub_libcuda
        stub = stub_libcuda()
        if not stub or not stub.exists():
            self.skipTest("the stub libcuda.so.1 is not built (tests/CMakeLists.txt builds it)")
        env = {"KILN_STUB_CUDA_DEVICES": H200, "KILN_STUB_CUDA_VERSION": "13000", "KILN_LIBCUDA": str(stub)}
        proc = self.kiln("doctor", "--json", "--python", str(python), "--server", server, env=env, timeout=900)
        self.assertIn(proc.returncode, (0, 1), proc.stderr)
        return json.loads(proc.stdout)["next"]

    def test_doctor_next_install_commands_use_kiln_as_the_only_index(self):
        cache = self.persistent_cache()
        # A known target without wheels (a copy of the default one, named as doctor names this
        # host's): kiln serves it with empty pages for kiln's names.
        (self.project / "manifests" / "targets" / f"{DOCTOR_TARGET}.toml").write_text(
            (SOURCE_DIR / "manifests" / "targets" / "default.toml").read_text())
        up = self.upstream()
        served = self.serve(cache, "--fallback-url", up.url)
        python = self.doctor_python()
        nxt = self.doctor_next(python, served.base)
        # Issue 51: doctor asks the server which targets it serves and installs from the one that
        # already holds this host's wheels (default), not from the name it would give the host's.
        self.assertEqual(nxt["target"], "default")
        default = served.index("default")
        pip_args = self.command_args(nxt["install"], ["pip", "install"])
        uv_args = self.command_args(nxt["install_uv"], ["uv", "pip", "install"])
        for args in (pip_args, uv_args):
            self.assertEqual(args[:2], ["--index-url", default], args)
            for other in ("--extra-index-url", "--index", "--default-index", "--trusted-host", "--find-links"):
                self.assertNotIn(other, args)
            self.assertLessEqual({"causal-conv1d", "flash-linear-attention"}, set(pins_of(args)))

        # As printed: everything resolves, kiln's from kiln.
        kiln_projects = self.kiln_projects(default)
        requested = set(pins_of(pip_args)) | {"fla-core"} | upstream_names(pins_of(pip_args))
        for args, resolve, how in ((pip_args, self.pip_resolve, "pip"), (uv_args, self.uv_compile, "uv")):
            _, resolved = resolve(args)
            self.assertEqual(set(resolved), requested, how)
            self.assert_resolution(resolved, default, kiln_projects, [up], requested, how)
        self.assert_no_own_requests(up, set(kiln_projects) | {"kiln-wheels"})

        # The same commands on the known target without wheels: kiln answers its own names (200,
        # no files), so pip and uv find no causal-conv1d, and never from the upstream.
        index = served.index(DOCTOR_TARGET)
        proc, _ = self.pip_resolve([a.replace(default, index) for a in pip_args], check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertRegex(proc.stderr, r"(?i)no matching distribution found for (causal-conv1d|flash-linear-attention)")
        proc, _ = self.uv_compile([a.replace(default, index) for a in uv_args], check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertRegex(proc.stderr, r"causal-conv1d|flash-linear-attention")
        text = served.log.read_text()
        self.assertRegex(text, rf"GET /{re.escape(DOCTOR_TARGET)}/simple/(causal-conv1d|flash-linear-attention)/ 200 ")
        self.assertNotRegex(text, rf"GET /{re.escape(DOCTOR_TARGET)}/simple/\S+ 404 ")
        self.assert_no_own_requests(up, set(OWN) | {"kiln-wheels", "kiln-demo"})
        for name in OWN:
            self.assertEqual(self.page_json(f"{index}{name}/")["files"], [])
        status, headers, _ = http_get(f"{index}torch/")
        self.assertEqual((status, headers.get("location")), (307, f"{up.url}torch/"))

        # A server doctor cannot ask (no such host): the host's own target, as before. A plain-http
        # server on another host: pip is told to trust it (host:port); https needs nothing.
        nxt = self.doctor_next(python, "http://builder.example:8000")
        self.assertEqual(nxt["target"], DOCTOR_TARGET)
        self.assertIn("--trusted-host builder.example:8000", nxt["install"])
        self.assertIn(f"--index-url http://builder.example:8000/{DOCTOR_TARGET}/simple/", nxt["install"])
        nxt = self.doctor_next(python, "https://builder.example")
        self.assertNotIn("--trusted-host", nxt["install"])

    def test_doctor_mamba2_install_commands_install_kiln_wheels(self):
        """The Mamba-2 line's commands, as printed, name kiln's index alone; pointed at a target kiln
        has built mamba-ssm for, they install into fresh venvs with kiln's wheels from kiln."""
        cache = self.persistent_cache()
        (self.project / "manifests" / "targets" / f"{DOCTOR_TARGET}.toml").write_text(
            (SOURCE_DIR / "manifests" / "targets" / "default.toml").read_text())
        up = self.upstream()
        served = self.serve(cache, "--fallback-url", up.url)
        if "mamba-ssm" not in self.kiln_projects(served.index("default")):
            self.skipTest("no mamba-ssm wheel for the default target in the persistent cache "
                          "(kiln build mamba-ssm: 15 minutes on 2 cores)")
        nxt = self.doctor_next(self.doctor_python(), served.base)
        default = served.index("default")  # the served target holding this host's wheels
        pip_args = self.command_args(nxt["install_mamba2"], ["pip", "install"])
        uv_args = self.command_args(nxt["install_mamba2_uv"], ["uv", "pip", "install"])
        for args in (pip_args, uv_args):
            self.assertEqual(args, ["--index-url", default, "causal-conv1d", "mamba-ssm"])
        venv = self.pip_venv("mamba-pip")
        self.run_client([str(venv / "bin" / "python"), "-m", "pip", "install", *pip_args])
        uv_venv = self.uv_venv("mamba-uv")
        self.run_client([self.tool("uv"), "pip", "install", *uv_args],
                        env=self.client_env(VIRTUAL_ENV=str(uv_venv)))
        needs = upstream_names({"mamba-ssm"})
        for env_dir in (venv, uv_venv):
            got = distributions(env_dir)
            for project in ("causal-conv1d", "mamba-ssm"):
                self.assertTrue((self.dist_info(env_dir, project) / "kiln.json").is_file(), (env_dir, project))
            for project in needs - {"setuptools"}:
                self.assertIn(project, got, env_dir)
                self.assertFalse((self.dist_info(env_dir, project) / "kiln.json").exists())
        self.assert_no_own_requests(up, {"causal-conv1d", "mamba-ssm", "kiln-wheels"})

    # --- (c) a target with its own torch index -------------------------------------------------

    def test_torch_comes_from_the_targets_torch_index(self):
        cache = self.persistent_cache()
        up = self.upstream()
        cu = self.upstream(upstream_mod.cu128_torch)
        text = (SOURCE_DIR / "manifests" / "targets" / "default.toml").read_text()
        self.assertIn('[torch]\nversion = "2.11.0"\n', text)
        text = text.replace('[torch]\nversion = "2.11.0"\n', f'[torch]\nversion = "2.11.0"\nindex-url = "{cu.url}"\n')
        (self.project / "manifests" / "targets" / "cu128-e2e.toml").write_text(text)
        served = self.serve(cache, "--fallback-url", up.url)
        index = served.index("cu128-e2e")

        def location(target, name):
            status, headers, _ = http_get(f"{served.index(target)}{name}/")
            self.assertEqual(status, 307, f"/{target}/simple/{name}/")
            self.assertEqual(headers.get("cache-control"), "no-store")
            return headers.get("location")
        self.assertEqual(location("cu128-e2e", "torch"), f"{cu.url}torch/")
        self.assertEqual(location("cu128-e2e", "einops"), f"{up.url}einops/")
        self.assertEqual(location("default", "torch"), f"{up.url}torch/")  # no index-url: the fallback
        # torch's own requirements follow it, when the pinned wheel is in the cache's downloads.
        pinned = tomllib.loads(text)["torch"]["wheel"]
        if any((cache / "downloads" / w["sha256"][:2] / w["sha256"] / w["file"]).is_file() for w in pinned):
            for name in ("filelock", "typing-extensions", "triton", "nvidia-nccl-cu13"):
                self.assertEqual(location("cu128-e2e", name), f"{cu.url}{name}/")
                self.assertEqual(location("default", name), f"{up.url}{name}/")
        self.assertEqual(self.page_json(f"{index}causal-conv1d/")["files"], [])

        _, resolved = self.pip_resolve(["--index-url", index, "torch==2.11.*"])
        self.assertEqual(set(resolved), {"torch"})
        self.assertEqual(resolved["torch"]["version"], "2.11.0+cu128")
        self.assertTrue(resolved["torch"]["url"].startswith(f"{cu.base}files/"), resolved)
        self.assertEqual(resolved["torch"]["sha256s"], cu.sha256s("torch"))
        _, compiled = self.uv_compile(["--index-url", index, "torch==2.11.*"])
        self.assertEqual(compiled["torch"]["version"], "2.11.0+cu128")
        self.assertEqual(compiled["torch"]["sha256s"], cu.sha256s("torch"))
        self.assertNotIn("torch", up.project_requests())
        self.assertEqual(up.requests, [])
        self.assertIn("torch", cu.project_requests())

    # --- (d) air-gapped: download once, install offline ----------------------------------------

    def test_downloaded_wheels_install_without_any_index(self):
        cache = self.persistent_cache()
        up = self.upstream()
        served = self.serve(cache, "--fallback-url", up.url)
        pip_args, _, pins = self.default_pins(served)
        reqs = pip_args[2:]
        wheels = self.tmp / "wheelhouse"
        self.run_client([sys.executable, "-m", "pip", "download", "-d", str(wheels),
                         "--index-url", served.index("default"), *reqs])
        up.stop()
        served.stop()
        for url in (up.url, served.base):
            with self.assertRaises(OSError):
                http_get(url)
        files = sorted(p.name for p in wheels.iterdir())
        self.assertEqual({normalize(f.split("-")[0]) for f in files}, set(pins) | upstream_names(pins), files)

        venv = self.pip_venv("offline-pip")
        self.run_client([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index", "--find-links",
                         str(wheels), *reqs])
        uv_venv = self.uv_venv("offline-uv")
        self.run_client([self.tool("uv"), "pip", "install", "--no-index", "--find-links", str(wheels), *reqs],
                        env=self.client_env(VIRTUAL_ENV=str(uv_venv)))
        got = distributions(venv)
        uv_got = distributions(uv_venv)
        # The pip venv's own setuptools meets mamba-ssm's setuptools>=61; the uv venv has none.
        for name in ("pip", "setuptools"):
            got.pop(name, None)
            uv_got.pop(name, None)
        self.assertEqual(got, uv_got)
        self.assertEqual({(n, v) for n, (v, _) in got.items()},
                         {(normalize(f.split("-")[0]), f.split("-")[1]) for f in files
                          if normalize(f.split("-")[0]) != "setuptools"})
        self.assertEqual({n for n, (_, k) in got.items() if k}, set(pins))

    # --- (e) no fallback, redirects, the token -------------------------------------------------

    def test_no_fallback_redirect_headers_and_the_token(self):
        cache = self.persistent_cache()
        up = self.upstream()

        # A target of the manifests directory with nothing built for it.
        (self.project / "manifests" / "targets" / "unbuilt-e2e.toml").write_text(
            (SOURCE_DIR / "manifests" / "targets" / "default.toml").read_text())

        # --no-fallback: other names are 404; kiln's own names are always kiln's.
        served = self.serve(cache, "--no-fallback")
        self.assertNotIn("unbuilt-e2e", served.ready["install"])
        own_empty = [("default", "kiln-wheels"), ("unbuilt-e2e", "causal-conv1d"), ("unbuilt-e2e", "kiln-demo"),
                     ("unbuilt-e2e", "flash-linear-attention"), ("unbuilt-e2e", "kiln-wheels")]
        for target, name in own_empty + [("default", "causal-conv1d")]:
            url = f"{served.index(target)}{name}/"
            status, headers, body = http_get(url, {"Accept": JSON_TYPE})
            self.assertEqual(status, 200, url)
            page = json.loads(body)
            self.assertEqual(normalize(page["name"]), name)
            if (target, name) in own_empty:
                self.assertEqual(page["files"], [], url)
                status, headers, body = http_get(url, {"Accept": "text/html"})
                self.assertEqual(status, 200, url)
                self.assertNotIn(b"<a ", body)
        for target, name in (("default", "torch"), ("default", "einops"), ("unbuilt-e2e", "torch")):
            self.assertEqual(http_get(f"{served.index(target)}{name}/")[0], 404, (target, name))
        self.assertEqual(http_get(f"{served.base}no-such-target/simple/torch/")[0], 404)
        proc, _ = self.pip_resolve(["--index-url", served.index("default"), "torch"], check=False)
        self.assertNotEqual(proc.returncode, 0)
        served.stop()

        # A redirect: 307, no-store, the upstream's normalised name.
        served = self.serve(cache, "--fallback-url", up.url)
        # "kiln" is another project's name on PyPI (kiln's own wheel is kiln-wheels): not kiln's.
        for path, name in (("torch/", "torch"), ("Typing_Extensions/", "typing-extensions"),
                           ("zope.interface/", "zope-interface"), ("kiln/", "kiln")):
            status, headers, body = http_get(f"{served.index('default')}{path}")
            self.assertEqual(status, 307, path)
            self.assertEqual(headers.get("cache-control"), "no-store", path)
            self.assertEqual(headers.get("location"), f"{up.url}{name}/", path)
        self.assertEqual(http_get(f"{served.index('unbuilt-e2e')}torch/")[0], 307)
        self.assertEqual(up.requests, [])
        served.stop()
        served = self.serve(cache, "--fallback-url", up.url.rstrip("/"))  # the slash is kiln's to add
        self.assertEqual(http_get(f"{served.index('default')}torch/")[1].get("location"), f"{up.url}torch/")
        served.stop()

        # The fallback by default: the index kiln resolves with ($PIP_INDEX_URL, else PyPI).
        served = self.serve(cache, env={"PIP_INDEX_URL": up.url})
        self.assertEqual(http_get(f"{served.index('default')}torch/")[1].get("location"), f"{up.url}torch/")
        served.stop()
        served = self.serve(cache)
        self.assertEqual(http_get(f"{served.index('default')}torch/")[1].get("location"),
                         "https://pypi.org/simple/torch/")
        served.stop()
        bad = self.kiln("--cache", str(cache), "serve", "--port", "0", "--fallback-url", "ftp://example.org/simple/")
        self.assertEqual(bad.returncode, 2, bad.stderr)

        # With a token: every request needs it; a redirect never carries it.
        token = "t0ken-l4st-m1le"
        (self.tmp / "token").write_text(token + "\n")
        served = self.serve(cache, "--fallback-url", up.url, "--token-file", str(self.tmp / "token"))
        index = served.index("default")
        self.assertEqual(http_get(f"{index}torch/")[0], 401)
        for auth in ({"Authorization": f"Bearer {token}"}, {}):
            url = f"{index}torch/" if auth else f"{index}torch/".replace("http://", f"http://kiln:{token}@")
            status, headers, body = http_get(url, auth)
            self.assertEqual(status, 307)
            self.assertEqual(headers.get("location"), f"{up.url}torch/")
            self.assertNotIn(token, json.dumps(headers))
            self.assertNotIn(token.encode(), body)
        self.assertNotIn(token, json.dumps(served.ready))
        self.assertNotIn(token, served.log.read_text())
        # pip and uv with the token in the index URL: kiln's packages from kiln, torch upstream,
        # and the upstream never sees the token.
        tokened = index.replace("http://", f"http://kiln:{token}@")
        _, resolved = self.pip_resolve(["--index-url", tokened, "causal-conv1d"])
        self.assertTrue(re.sub(r"//[^@/]*@", "//", resolved["causal-conv1d"]["url"]).startswith(
            f"{index}causal-conv1d/"), resolved)
        self.assertTrue(resolved["torch"]["url"].startswith(f"{up.base}files/"))
        _, compiled = self.uv_compile(["--index-url", tokened, "causal-conv1d"])
        self.assertLessEqual(compiled["torch"]["sha256s"], up.sha256s("torch"))
        self.assertTrue(compiled["torch"]["sha256s"])
        self.assertTrue(up.requests)
        self.assertEqual([a for a in up.authorizations], [])

    # --- (f) the commands scripts/run and docs/serve.md print -----------------------------------

    def documented_commands(self):
        """(source, command) of the pip and uv install commands scripts/run's heredocs and
        docs/serve.md show with kiln's index at http://127.0.0.1:8000/."""
        out = []
        run = SOURCE_DIR / "scripts" / "run"
        if run.exists():
            heredocs = "\n".join(m.group(2) for m in re.finditer(r"<<-?\s*['\"]?(\w+)['\"]?\n(.*?)\n\1(?:\n|$)",
                                                                  run.read_text(), re.S))
            for cmd in shell_commands(heredocs, ("uv pip install ", "pip install ")):
                out.append(("scripts/run", cmd))
        doc = SOURCE_DIR / "docs" / "serve.md"
        if doc.exists():
            for cmd in shell_commands(doc.read_text(), ("uv pip install --index-url http://127.0.0.1:8000/",
                                                        "pip install --index-url http://127.0.0.1:8000/")):
                if re.match(r"(uv )?pip install --index-url http://127\.0\.0\.1:8000/", cmd):
                    out.append(("docs/serve.md", cmd))
        return out

    def test_commands_in_scripts_run_and_docs_serve_md(self):
        cache = self.persistent_cache()
        up = self.upstream()
        served = self.serve(cache, "--fallback-url", up.url)
        commands = self.documented_commands()
        projects = {}  # index URL -> what kiln has files of there
        ran, skipped = {}, []
        for source, cmd in commands:
            args = shlex.split(cmd.replace("http://127.0.0.1:8000/", served.base))
            if any(a in ("-r", "--requirement") or a.startswith("--requirement=") or placeholder(a) for a in args):
                skipped.append(cmd)
                continue  # a file or a placeholder: not a command to run as it is
            uv = args[0] == "uv"
            head = ["uv", "pip", "install"] if uv else ["pip", "install"]
            self.assertEqual(args[:len(head)], head, cmd)
            rest = args[len(head):]
            for other in ("--extra-index-url", "--index", "--default-index", "--find-links"):
                self.assertNotIn(other, rest, f"{source}: kiln's index should be the only one: {cmd}")
            self.assertNotIn("pypi.org", cmd, f"{source}: {cmd}")
            index_url = rest[rest.index("--index-url") + 1]
            target = index_url[len(served.base):].split("/")[0]
            if target not in served.ready["indexes"]:
                skipped.append(cmd)  # a target this machine's cache has not built (an example)
                continue
            if index_url not in projects:
                projects[index_url] = self.kiln_projects(index_url)
            requested = set(pins_of(rest))
            self.assertTrue(requested & set(projects[index_url]), f"{source}: no kiln package in {cmd}")
            resolve = self.uv_compile if uv else self.pip_resolve
            _, resolved = resolve(rest)
            self.assert_resolution(resolved, index_url, projects[index_url], [up], requested, f"{source}: {cmd}")
            ran.setdefault(source, set()).add(head[0])
        self.assertEqual(ran, {"scripts/run": {"pip", "uv"}, "docs/serve.md": {"pip", "uv"}},
                         f"commands found: {commands}; not run: {skipped}")
        self.assert_no_own_requests(up, set().union(*projects.values()) | {"kiln-wheels"})

    # --- (g) the static export with uv's first-index strategy ----------------------------------

    def test_export_with_uv_index_and_default_index(self):
        cache = self.persistent_cache()
        up = self.upstream()
        out = self.tmp / "site"
        # The recipe it prints names the index kiln resolves with as uv's default index.
        proc = self.kiln("--cache", str(cache), "index", "export", str(out), check=0,
                         env={"PIP_INDEX_URL": up.url, "PIP_CONFIG_FILE": os.devnull})
        self.assertEqual(proc.stdout.strip(), str(out))  # stdout: the directory, as before
        recipes = [c for c in shell_commands(proc.stderr, ("uv pip install ",)) if "/default/simple/" in c]
        self.assertEqual(len(recipes), 1, proc.stderr)
        args = self.command_args(recipes[0], ["uv", "pip", "install"])
        self.assertLess(args.index("--index"), args.index("--default-index"), recipes[0])
        self.assertEqual(args[args.index("--default-index") + 1], up.url)
        self.assertTrue(args[args.index("--index") + 1].endswith(f"{out}/default/simple/"), recipes[0])

        # Every target's export has a page for each of kiln's names (its own and its manifests'
        # packages): empty where it has no files.
        names = {"kiln-wheels", *(p.name for p in (self.project / "manifests").iterdir()
                           if p.is_dir() and p.name not in ("targets", "tools"))}
        targets = sorted(p.parent.name for p in out.glob("*/simple"))
        self.assertIn("default", targets)
        projects = {}
        for target in targets:
            projects[target] = {}
            for name in names:
                page = json.loads((out / target / "simple" / name / "index.json").read_text())
                html_page = (out / target / "simple" / name / "index.html").read_text()
                self.assertEqual(bool(page["files"]), "<a " in html_page, (target, name))
                if page["files"]:
                    projects[target][name] = {f["filename"]: f["hashes"]["sha256"] for f in page["files"]}
        self.assertEqual(projects["default"].get("kiln-wheels"), None)
        for name in OWN:
            self.assertIn(name, projects["default"])

        # The recipe as printed (its file:// index), then the same tree from a static web server.
        requested = set(pins_of(args)) | upstream_names(pins_of(args))
        _, compiled = self.uv_compile(args)
        self.assertEqual(set(compiled), requested)
        self.assert_resolution(compiled, None, projects["default"], [up], requested, "uv (the export's recipe)")

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kw):
                super().__init__(*args, directory=str(out), **kw)

            def log_message(self, *args):
                pass
        static = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=static.serve_forever, daemon=True).start()
        self.addCleanup(static.server_close)
        self.addCleanup(static.shutdown)
        index = f"http://127.0.0.1:{static.server_port}/default/simple/"
        _, compiled = self.uv_compile(["--index", index, "--default-index", up.url, *OWN])
        self.assertEqual(set(compiled), set(OWN) | UPSTREAM_NAMES)
        self.assert_resolution(compiled, index, projects["default"], [up], set(OWN) | UPSTREAM_NAMES,
                               "uv (the export on a web server)")
        # A name of kiln's without files: uv stops at the export's empty page.
        for idx in (args[args.index("--index") + 1], index):
            proc, _ = self.uv_compile(["--index", idx, "--default-index", up.url, "kiln-wheels"], check=False)
            self.assertNotEqual(proc.returncode, 0)
        self.assert_no_own_requests(up, names)


if __name__ == "__main__":
    import unittest
    unittest.main()
