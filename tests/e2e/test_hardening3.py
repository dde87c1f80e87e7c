"""Hardening III (issue 46), each attack against the real binary: the configuration's strings and
file, gc on what is not a kiln cache, the commands kiln prints pasted into real dash and bash with
hostile index URLs, --server values and torch versions, kiln's own tool wheel on the index, a
stranger's JSON nested deep, and the lesser ones (wheel pack's versions, credentials in
--print-sha256, a huge field in validate's report)."""

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile

from kilntest import KILN, SOURCE_DIR, SourceTestCase

SHELLS = [s for s in ("dash", "bash") if shutil.which(s)]
WHEEL = "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


class ConfigurationAndGcTest(SourceTestCase):
    def test_a_nul_in_the_configurations_cache_deletes_nothing(self):
        """`cache = "<victim>/\\u0000"` once made `kiln cache gc --all` delete <victim>."""
        victim = self.tmp / "v" / "victim"
        victim.mkdir(parents=True)
        (victim / "thesis.tex").write_text("mine")
        config_dir = self.tmp / "config"
        config_dir.mkdir()
        (config_dir / "keep").write_text("mine")
        for value in (f"{victim}/\\u0000", "\\u0000", f"{victim}\\u0000/tmp"):
            with self.subTest(value=value):
                (config_dir / "config.toml").write_text(f'cache = "{value}"\n')
                env = {"KILN_CONFIG": str(config_dir / "config.toml")}
                env_cache = dict(os.environ)
                env_cache.pop("KILN_CACHE", None)
                proc = subprocess.run([self.kiln_path(), "cache", "gc", "--all"], env={**env_cache, **env},
                                      cwd=self.tmp, capture_output=True, text=True)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertRegex(proc.stderr, r"kiln: error: .*config\.toml:1:9: 'cache' holds the "
                                              r"control character U\+0000")
                self.assertEqual((victim / "thesis.tex").read_text(), "mine")
                self.assertEqual((config_dir / "keep").read_text(), "mine")

    def test_a_kiln_config_that_does_not_exist_is_an_error(self):
        """A mistyped KILN_CONFIG once left kiln on another cache, which `gc --all` emptied."""
        other = self.tmp / "xdg-cache"
        env = {"XDG_CACHE_HOME": str(other), "KILN_CONFIG": str(self.tmp / "confg.toml")}
        full = dict(os.environ)
        full.pop("KILN_CACHE", None)
        full.update(env)
        (other / "kiln" / "cache" / "wheels").mkdir(parents=True)
        (other / "kiln" / "cache" / "wheels" / "keep").write_text("x")
        proc = subprocess.run([self.kiln_path(), "cache", "gc", "--all"], env=full, cwd=self.tmp,
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn(f"kiln: error: $KILN_CONFIG: {self.tmp / 'confg.toml'} does not exist "
                      "(KILN_CONFIG=/dev/null: no configuration file)", proc.stderr)
        self.assertTrue((other / "kiln" / "cache" / "wheels" / "keep").exists())
        full["KILN_CONFIG"] = str(self.tmp)  # a directory
        proc = subprocess.run([self.kiln_path(), "cache", "ls"], env=full, cwd=self.tmp,
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("is not a regular file", proc.stderr)
        full["KILN_CONFIG"] = "/dev/null"  # still "no configuration"
        proc = subprocess.run([self.kiln_path(), "--version"], env=full, capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_gc_acts_only_on_a_kiln_cache(self):
        # Somebody's directory, named by --cache: refused, untouched.
        home = self.tmp / "home"
        (home / "tmp").mkdir(parents=True)
        (home / "tmp" / "draft").write_text("mine")
        (home / "notes.txt").write_text("mine")
        for args in (["--all"], ["--max-size", "0"], []):
            proc = self.kiln("--cache", str(home), "cache", "gc", *args, check=2)
            self.assertIn(f"kiln: error: {home} is not a kiln cache: no CACHEDIR.TAG of kiln's, and it "
                          "holds 'notes.txt', which kiln never makes", proc.stderr)
        self.assertEqual((home / "tmp" / "draft").read_text(), "mine")
        self.assertFalse((home / "CACHEDIR.TAG").exists())

        # A cache kiln writes is marked at once; gc collects it, and what a user put there stays.
        self.local_archive("demo-1.0.0.tar.gz", self.good_sdist())
        cache = self.fresh_cache("c")
        self.kiln("--cache", str(cache), "build", "demo", check=0)
        tag = (cache / "CACHEDIR.TAG").read_text()
        self.assertTrue(tag.startswith("Signature: 8a477f597d28d172789f06886806bc55\n"), tag)
        (cache / "README").write_text("mine")
        out = json.loads(self.kiln("--cache", str(cache), "--json", "cache", "gc", "--all", check=0).stdout)
        self.assertEqual(out["removed_items"], 1, out)
        self.assertEqual((cache / "README").read_text(), "mine")

        # A cache from before the tag (kiln's layout alone): recognised, marked, collected.
        legacy = self.tmp / "legacy"
        self.kiln("--cache", str(legacy), "build", "demo", check=0)
        (legacy / "CACHEDIR.TAG").unlink()
        (legacy / ".gitkeep").write_text("")
        proc = self.kiln("--cache", str(legacy), "--json", "cache", "gc", "--all", check=0)
        self.assertEqual(json.loads(proc.stdout)["removed_items"], 1)
        self.assertIn(f"marked {legacy} as a kiln cache (CACHEDIR.TAG): its layout is kiln's", proc.stderr)
        self.assertEqual((legacy / "CACHEDIR.TAG").read_text(), tag)

    def kiln_path(self):
        return KILN


def stubs(directory, log):
    """pip, uv and kiln on PATH that only record their argv (NUL-separated) into `log`."""
    directory.mkdir()
    for name in ("pip", "uv", "kiln"):
        path = directory / name
        path.write_text(f"#!/bin/sh\nprintf '%s\\0' \"$(basename \"$0\")\" \"$@\" >> '{log}'\n")
        path.chmod(0o755)


class PrintedCommandsTest(SourceTestCase):
    """Each printed line, pasted as it stands into dash and bash, runs one stubbed command with
    exactly the words kiln meant; the hostile values' `touch` never runs."""

    def setUp(self):
        super().setUp()
        if not SHELLS:
            self.skipTest("neither dash nor bash")
        self.marker = self.tmp / "pwned"
        self.log = self.tmp / "argv.log"
        stubs(self.tmp / "stubs", self.log)

    def hostile(self, base):
        """A URL that RFC 3986 and kiln's URL checks allow, which a shell would run."""
        return f"{base};touch${{IFS}}{self.marker};echo/"

    def paste(self, line):
        """Runs `line` in each shell; the argv lists the stubs recorded (one per shell)."""
        runs = []
        for shell in SHELLS:
            self.log.write_bytes(b"")
            proc = subprocess.run([shell, "-c", line], capture_output=True, text=True, cwd=self.tmp,
                                  env={"PATH": f"{self.tmp / 'stubs'}:/usr/bin:/bin", "HOME": str(self.tmp)})
            self.assertEqual(proc.returncode, 0, f"{shell}: {line}\n{proc.stderr}")
            words = self.log.read_bytes().split(b"\0")[:-1]
            runs.append([w.decode() for w in words])
            self.assertFalse(self.marker.exists(), f"{shell} ran more than the command: {line}")
        self.assertEqual(len({json.dumps(r) for r in runs}), 1, runs)
        return runs[0]

    def lines_after(self, text, prefix):
        return [l[len(prefix):] for l in text.splitlines() if l.startswith(prefix)]

    def test_index_export_lines_with_a_hostile_torch_index_and_fallback(self):
        self.local_archive("demo-1.0.0.tar.gz", self.good_sdist())
        torch_index = self.hostile("https://torch.example/whl/cu130")
        fallback = self.hostile("https://mirror.example/simple")
        target = self.project / "manifests" / "targets" / "default.toml"
        target.write_text(target.read_text().replace('version = "2.11.0"\n',
                                                     f'version = "2.11.0"\nindex-url = "{torch_index}"\n', 1))
        cache = self.fresh_cache("c")
        self.kiln("--cache", str(cache), "build", "demo", check=0)
        proc = self.kiln("--cache", str(cache), "index", "export", str(self.tmp / "site"), check=0,
                         env={"PIP_INDEX_URL": fallback, "PIP_CONFIG_FILE": os.devnull})
        lines = self.lines_after(proc.stderr, "kiln: default: ")
        self.assertEqual(len(lines), 3, proc.stderr)
        tree = f"file://{self.tmp}/site/default/simple/"
        uv, lock, pip = (self.paste(l) for l in lines)
        self.assertEqual(uv, ["uv", "pip", "install", "--index", tree, "--index", torch_index,
                              "--default-index", fallback, "demo==1.0.0"])
        self.assertEqual(lock, ["uv", "pip", "compile", "--generate-hashes", "--index", tree, "--index",
                                torch_index, "--default-index", fallback, "requirements.in",
                                "-o", "requirements.txt"])
        self.assertEqual(pip, ["pip", "install", "--require-hashes", "--index-url", tree,
                               "--extra-index-url", fallback, "-r", "requirements.txt"])

    def test_serve_lines_run_as_printed(self):
        self.local_archive("demo-1.0.0.tar.gz", self.good_sdist())
        cache = self.fresh_cache("c")
        self.kiln("--cache", str(cache), "build", "demo", check=0)
        url, proc, log = self.start_serve(cache, "--fallback-url", self.hostile("https://f.example/simple"))
        lines = self.lines_after(log.read_text(), "kiln: default: ")
        self.assertEqual([self.paste(l) for l in lines],
                         [["pip", "install", "--index-url", f"{url}default/simple/", "demo==1.0.0"],
                          ["uv", "pip", "install", "--index-url", f"{url}default/simple/", "demo==1.0.0"]])

    def test_doctor_lines_with_a_hostile_server_and_torch_version(self):
        site = self.tmp / "site"
        version = f"2.11.0;touch${{IFS}}{self.marker};echo"
        (site / "torch-2.11.0.dist-info").mkdir(parents=True)
        (site / "torch-2.11.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\n")
        (site / "torch").mkdir()
        (site / "torch" / "version.py").write_text(f"__version__ = '{version}'\ncuda = '13.0'\n")
        server = self.hostile("http://buildhost:8000/x")
        env = {"PYTHONPATH": str(site), "KILN_LIBCUDA": "/nonexistent/libcuda.so.1"}
        doc = json.loads(self.kiln("--json", "doctor", "--python", sys.executable, "--server", server,
                                   env=env).stdout)
        expected = doc["next"]["argv_for"]["fast_path+mamba2_fast_path"]
        self.assertIn(version + "+cu130", expected[0])  # the torch version as the host gave it
        # No GPU: the archs are a placeholder with a quote in it, which once broke the line's quoting.
        self.assertIn("<the GPUs' compute capabilities, e.g. 9.0>", expected[0])
        text = self.kiln("doctor", "--python", sys.executable, "--server", server, env=env).stdout
        lines = self.lines_after(text, "  ")
        lines = lines[lines.index(next(l for l in lines if l.startswith("kiln target init"))):]
        self.assertEqual([self.paste(l) for l in lines], expected)
        # doctor.py alone (curl …/doctor.py | python3 -) prints the same lines.
        script = SOURCE_DIR / "builder" / "doctor" / "doctor.py"
        alone = subprocess.run([sys.executable, str(script), "--server", server], env={**os.environ, **env},
                               capture_output=True, text=True)
        own = self.lines_after(alone.stdout, "  ")
        start = next(i for i, l in enumerate(own) if l.startswith("kiln target init"))
        self.assertEqual([self.paste(l) for l in own[start:]], expected)


class StrangersTest(SourceTestCase):
    def test_a_report_nested_deep_is_refused_not_a_crash(self):
        """A --python printing arrays 100,000 deep once crashed `kiln --json doctor` (SIGSEGV)."""
        fake = self.tmp / "python3"
        fake.write_text("#!/bin/sh\nexec python3 -c \"import sys; sys.stdout.write('{\\\"doctor_version\\\": 1, "
                        "\\\"x\\\": ' + '[' * 100000 + ']' * 100000 + '}')\"\n")
        fake.chmod(0o755)
        for args in (["--json", "doctor"], ["doctor"]):
            proc = self.kiln(*args, "--python", str(fake))
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertIn(f"kiln: error: doctor.py under {fake} did not print its report", proc.stderr)

    def test_kiln_wheels_is_kilns_own_name_and_checked_against_its_metadata(self):
        self.local_archive("demo-1.0.0.tar.gz", self.good_sdist())
        cache = self.fresh_cache("c")
        self.kiln("--cache", str(cache), "build", "demo", check=0)
        import urllib.request
        import urllib.error
        url, proc, log = self.start_serve(cache, "--fallback-url", "https://pypi.org/simple/")

        def get(path):
            try:
                with urllib.request.urlopen(urllib.request.Request(url + path, headers={
                        "Accept": "application/vnd.pypi.simple.v1+json"})) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as e:
                return e.code, None
        # Without <cache>/kiln-wheels/: an empty page of kiln's, never a redirect to PyPI.
        status, page = get("default/simple/kiln-wheels/")
        self.assertEqual((status, page["files"]), (200, []))
        # A file whose name says 1!2.0 over METADATA of 0.1.0 is not served.
        own = cache / "kiln-wheels"
        own.mkdir()
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("kiln_wheels-0.1.0.dist-info/METADATA",
                       "Metadata-Version: 2.1\nName: kiln-wheels\nVersion: 0.1.0\n")
        (own / "kiln_wheels-1!2.0-py3-none-any.whl").write_bytes(buf.getvalue())
        status, page = get("default/simple/kiln-wheels/")
        self.assertEqual((status, page["files"]), (200, []))
        proc.terminate()
        proc.wait()
        url, proc, log = self.start_serve(cache, "--fallback-url", "https://pypi.org/simple/")
        status, page = get("default/simple/kiln-wheels/")
        self.assertEqual((status, page["files"]), (200, []))
        self.assertIn("kiln_wheels-1!2.0-py3-none-any.whl: its METADATA says Version 0.1.0, not 1!2.0",
                      log.read_text())


class LesserTest(SourceTestCase):
    def test_wheel_pack_refuses_versions_nothing_would_install(self):
        for version in ("1 0", "1$(id)", ".."):
            tree = self.tmp / f"t{len(list(self.tmp.glob('t*')))}"
            info = tree / f"tool-{version}.dist-info"
            info.mkdir(parents=True)
            (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tool\nVersion: {version}\n")
            (info / "WHEEL").write_text("Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
            proc = self.kiln("wheel", "pack", str(tree), "-o", str(self.outside), check=2)
            self.assertIn("is not a normalised PEP 440 version", proc.stderr)
        self.assertEqual(list(self.outside.iterdir()), [])

    def test_print_sha256_keeps_credentials_out_of_the_manifest_lines(self):
        (self.served / "demo-1.0.0.tar.gz").write_bytes(self.good_sdist())
        base = self.server()
        url = base.replace("http://", "http://user:S3CRET@") + "/demo-1.0.0.tar.gz"
        proc = self.kiln("--json", "fetch", "--print-sha256", url, check=0)
        self.assertNotIn("S3CRET", proc.stdout + proc.stderr)
        self.assertIn(f'url = "{base}/demo-1.0.0.tar.gz"', proc.stderr)
        self.assertIn("user:***@", json.loads(proc.stdout)[0]["source"])

    def test_validate_cuts_a_huge_field_in_its_report(self):
        """A 2.5 MB module name in an import: one 4 MB line of validate's report at d7e7835."""
        big = "x" * (2500 * 1024)
        files = {"demo/__init__.py": f"import demo.{big}\n".encode()}
        buf = io.BytesIO()
        info = "demo-1.0.0.dist-info"
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            for n, d in files.items():
                z.writestr(n, d)
            z.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: demo\nVersion: 1.0.0\n")
            z.writestr(f"{info}/WHEEL", WHEEL)
            z.writestr(f"{info}/RECORD", "".join(
                f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}\n"
                for n, d in [*files.items(), (f"{info}/METADATA", b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0.0\n"),
                             (f"{info}/WHEEL", WHEEL.encode())]) + f"{info}/RECORD,,\n")
        wheel = self.tmp / "demo-1.0.0-py3-none-any.whl"
        wheel.write_bytes(buf.getvalue())
        for before, after in (([], []), (["-v"], []), (["--json"], [])):
            proc = self.kiln(*before, "validate", *after, str(wheel))
            self.assertEqual(proc.returncode, 0, proc.stderr)  # a warning: not a kiln wheel
            longest = max(len(l) for l in (proc.stdout + proc.stderr).splitlines())
            self.assertLess(longest, 8192, (before, after))


if __name__ == "__main__":
    import unittest
    unittest.main()
