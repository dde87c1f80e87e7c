"""Signed attestations: `kiln key generate`, a signed build, `kiln verify`, and the same envelopes
checked by tools kiln did not write (tests/support/attest_check.py: securesystemslib for DSSE and
Ed25519, in-toto-attestation's models for the Statement and the SLSA predicate), through the cache,
`kiln serve` and `kiln index export`.

What is checked: every wheel a signed build makes has an envelope that both verifiers accept; a
tampered wheel, a tampered envelope, a wrong key and another wheel's envelope fail both; a remote
cache hit is not signed by its taker (the builder's envelope comes with it, when it names that
wheel); the private key is written 0600, never printed, and a key others can read
is refused before anything is built.
"""

import base64
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import urllib.request
from pathlib import Path

from kilntest import SOURCE_DIR, TOOLS, KilnTestCase

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import services  # noqa: E402

CHECKER = SOURCE_DIR / "tests" / "support" / "attest_check.py"
PURE = ("fla-core", "flash-linear-attention")


class AttestTest(KilnTestCase):
    def setUp(self):
        super().setUp()
        self.keys = self.tmp / "keys"
        self.keys.mkdir(mode=0o700)
        self.key = self.keys / "signer.pem"
        self.pub = Path(f"{self.key}.pub")
        proc = self.kiln("--json", "key", "generate", str(self.key), check=0)
        self.generated = proc

    def build(self, cache, *packages, check=0, extra=(), env=None):
        proc = self.kiln("--json", "build", *packages, *extra, check=check,
                         env={"KILN_CACHE": str(cache), "KILN_SIGNING_KEY": str(self.key),
                              **(env or {})})
        return {i["package"]: i for i in json.loads(proc.stdout)["items"]} if check == 0 else proc

    def independent(self, wheel, attestation, pub=None, name=None):
        """attest_check.py's verdict: (ok, its JSON)."""
        python = TOOLS / "bin" / "python"
        if not python.exists():
            self.fail(f"{python} is missing: scripts/test installs tests/tools-requirements.txt")
        args = [str(python), str(CHECKER), str(wheel), str(attestation), str(pub or self.pub)]
        proc = subprocess.run(args + ([name] if name else []), capture_output=True, text=True,
                              timeout=120)
        out = json.loads(proc.stdout)
        self.assertEqual(proc.returncode == 0, out["ok"], proc.stderr)
        return out["ok"], out

    def verify(self, *args, check):
        proc = self.kiln("--json", "verify", *map(str, args), "--key", str(self.pub), check=check)
        return json.loads(proc.stdout) if proc.stdout.strip() else None

    def failed_check(self, report):
        return [c["id"] for c in report["wheels"][0]["checks"] if c["verdict"] == "fail"]

    def test_signed_wheels_verify_with_kiln_and_independent_tools_and_tampering_fails_both(self):
        # The key: 0600, its public half beside it, the private bytes never printed.
        info = json.loads(self.generated.stdout)
        self.assertEqual(info["private_key"], str(self.key))
        self.assertEqual(stat.S_IMODE(self.key.stat().st_mode), 0o600)
        self.assertIn("BEGIN PUBLIC KEY", self.pub.read_text())
        self.assertNotIn("PRIVATE", self.generated.stdout + self.generated.stderr)
        again = self.kiln("key", "generate", str(self.key), check=2)
        self.assertIn("exists", again.stderr)
        public = self.kiln("key", "public", str(self.key), check=0)
        self.assertEqual(public.stdout, self.pub.read_text())

        cache = self.fresh_cache("signed")
        items = self.build(cache, *PURE, "kiln-demo")
        demo = items["kiln-demo"]
        for item in items.values():
            wheel, attestation = Path(item["wheel"]), Path(item["attestation"])
            self.assertEqual(attestation, Path(f"{wheel}.intoto.jsonl"))
            ok, out = self.independent(wheel, attestation)
            self.assertTrue(ok, out)
            predicate = out["statement"]["predicate"]
            with __import__("zipfile").ZipFile(wheel) as z:
                kiln_json = json.loads(next(z.read(n) for n in z.namelist()
                                            if n.endswith(".dist-info/kiln.json")))
            definition = predicate["buildDefinition"]
            self.assertEqual(definition["internalParameters"]["build_key"], kiln_json["build_key"])
            self.assertEqual(definition["externalParameters"]["package"],
                             kiln_json["inputs"]["package"])
            source = kiln_json["inputs"]["package"]["source"]
            self.assertIn({"sha256": source["sha256"]} if source.get("sha256") else
                          {"kiln_tree_sha256": source["tree_sha256"]},
                          [d.get("digest") or d.get("annotations")
                           for d in definition["resolvedDependencies"]])
        demo_internal = self.independent(Path(demo["wheel"]), Path(demo["attestation"]))[1][
            "statement"]["predicate"]["buildDefinition"]["internalParameters"]
        self.assertIs(demo_internal["sandboxed"], True)
        names = [d.get("name") for d in self.independent(
            Path(demo["wheel"]), Path(demo["attestation"]))[1]["statement"]["predicate"][
            "buildDefinition"]["resolvedDependencies"]]
        self.assertTrue(any(n and n.startswith("torch-") for n in names), names)

        report = self.verify(*(i["wheel"] for i in items.values()), check=0)
        self.assertTrue(report["ok"])
        self.assertEqual([c["id"] for c in report["wheels"][0]["checks"]],
                         ["attestation", "signature", "statement", "subject", "predicate"])

        self.tampering(Path(demo["wheel"]), Path(demo["attestation"]),
                       Path(items["fla-core"]["wheel"]))
        self.served_and_exported(cache, items)

    def tampering(self, wheel, attestation, other_wheel):
        work = self.tmp / "tampered"
        work.mkdir()

        # A tampered wheel: one byte of its zip changed, under its own name, its envelope beside.
        bad = work / "wheel" / wheel.name
        bad.parent.mkdir()
        data = bytearray(wheel.read_bytes())
        data[len(data) // 2] ^= 0x01
        bad.write_bytes(bytes(data))
        shutil.copy(attestation, f"{bad}.intoto.jsonl")
        self.assertEqual(self.failed_check(self.verify(bad, check=1)), ["subject"])
        self.assertFalse(self.independent(bad, f"{bad}.intoto.jsonl")[0])

        # A tampered envelope: its statement's build key changed, the signature kept.
        envelope = json.loads(attestation.read_text())
        statement = json.loads(base64.b64decode(envelope["payload"]))
        statement["predicate"]["buildDefinition"]["internalParameters"]["build_key"] = "0" * 64
        envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
        forged = work / "forged.intoto.jsonl"
        forged.write_text(json.dumps(envelope) + "\n")
        report = self.verify(wheel, "--attestation", forged, check=1)
        self.assertEqual(self.failed_check(report), ["signature"])
        self.assertFalse(self.independent(wheel, forged)[0])

        # A wrong key: another key's public half.
        other = self.keys / "other.pem"
        self.kiln("key", "generate", str(other), check=0)
        proc = self.kiln("--json", "verify", str(wheel), "--key", f"{other}.pub", check=1)
        self.assertEqual(self.failed_check(json.loads(proc.stdout)), ["signature"])
        self.assertFalse(self.independent(wheel, attestation, pub=f"{other}.pub")[0])

        # Another wheel's envelope beside this wheel.
        report = self.verify(wheel, "--attestation", f"{other_wheel}.intoto.jsonl", check=1)
        self.assertEqual(self.failed_check(report), ["subject"])
        self.assertFalse(self.independent(wheel, f"{other_wheel}.intoto.jsonl")[0])

        # No envelope at all.
        lone = work / "lone" / wheel.name
        lone.parent.mkdir()
        shutil.copy(wheel, lone)
        report = self.verify(lone, check=1)
        self.assertEqual(self.failed_check(report), ["attestation"])

    def served_and_exported(self, cache, items):
        base, _, log = self.start_serve(cache)
        demo = items["kiln-demo"]
        target = demo["target"]
        req = urllib.request.Request(f"{base}{target}/simple/kiln-demo/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            page = json.load(r)
        (entry,) = page["files"]
        url = f"{base}{target}/simple/kiln-demo/{entry['url']}"
        with urllib.request.urlopen(f"{url}.intoto.jsonl", timeout=30) as r:
            self.assertEqual(r.read(), Path(demo["attestation"]).read_bytes())
        report = self.verify(f"{url}#sha256={entry['hashes']['sha256']}", check=0)
        self.assertTrue(report["ok"], report)

        export = self.tmp / "export"
        self.kiln("--cache", str(cache), "index", "export", str(export), check=0)
        exported = sorted(export.rglob("*.whl"))
        self.assertEqual(len(exported), len(items))
        for wheel in exported:
            self.assertTrue(Path(f"{wheel}.intoto.jsonl").is_file(), wheel)
        self.assertTrue(self.verify(export, check=0)["ok"])

    def test_a_remote_hit_is_not_signed_by_its_taker_and_a_readable_key_is_refused(self):
        readable = self.keys / "readable.pem"
        shutil.copy(self.key, readable)
        os.chmod(readable, 0o644)
        proc = self.kiln("build", "fla-core", check=2,
                         env={"KILN_CACHE": str(self.fresh_cache("refused")),
                              "KILN_SIGNING_KEY": str(readable)})
        self.assertIn("chmod 600", proc.stderr)
        self.assertNotIn("building", proc.stderr)
        # Package code outside the sandbox could read the key: a signed build refuses to run it.
        proc = self.build(self.fresh_cache("unsandboxed"), "kiln-demo", check=2,
                          env={"KILN_SANDBOX": "off"})
        self.assertIn("could read the key", proc.stderr)
        self.assertNotIn("building", proc.stderr)

        try:
            redis = services.Redis(self.tmp)
        except services.ServiceMissing as e:
            raise self.failureException(str(e)) from None
        self.addCleanup(redis.stop)
        remote = ("--remote-cache", redis.url)
        first = self.build(self.fresh_cache("a"), "fla-core", extra=remote)["fla-core"]
        self.assertFalse(first["remote_hit"])
        self.assertTrue(Path(first["attestation"]).is_file())

        # A worker with another key takes the wheel from the remote: it signs nothing; the
        # builder's envelope comes along, and verifies with the builder's key only.
        taker = self.keys / "taker.pem"
        self.kiln("key", "generate", str(taker), check=0)
        second = self.build(self.fresh_cache("b"), "fla-core", extra=remote,
                            env={"KILN_SIGNING_KEY": str(taker)})["fla-core"]
        self.assertTrue(second["remote_hit"])
        self.assertEqual(Path(second["attestation"]).read_bytes(),
                         Path(first["attestation"]).read_bytes())
        self.assertTrue(self.verify(second["wheel"], check=0)["ok"])
        proc = self.kiln("--json", "verify", second["wheel"], "--key", f"{taker}.pub", check=1)
        self.assertEqual(self.failed_check(json.loads(proc.stdout)), ["signature"])

        # A remote whose envelope beside the wheel is another wheel's: dropped, said so, and the
        # wheel taken unsigned.
        key, wheel = first["key"], Path(first["wheel"]).name
        other = self.build(self.fresh_cache("c"), "flash-linear-attention")[
            "flash-linear-attention"]
        body = Path(other["attestation"]).read_bytes()  # whole, as a remote entry must be
        redis.command("SET", f"kiln:wheels/{key}/{wheel}.intoto.jsonl",
                      b"kiln-object 1 " + hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
        proc = self.kiln("--json", "build", "fla-core", *remote, check=0,
                         env={"KILN_CACHE": str(self.fresh_cache("d")),
                              "KILN_SIGNING_KEY": str(taker)})
        self.assertIn("is dropped: the statement vouches for flash_linear_attention", proc.stderr)
        (third,) = json.loads(proc.stdout)["items"]
        self.assertTrue(third["remote_hit"])
        self.assertIsNone(third["attestation"])
        self.assertEqual(list(Path(third["wheel"]).parent.glob("*.intoto.jsonl")), [])
        self.assertEqual(self.failed_check(self.verify(third["wheel"], check=1)), ["attestation"])

if __name__ == "__main__":
    import unittest
    unittest.main()
