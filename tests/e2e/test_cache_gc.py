"""`kiln cache gc --max-age/--max-size`: wheels and objects evicted by their last use in a build,
what a build holds kept, and the cache still verified, listed and exported afterwards."""

import fcntl
import hashlib
import json
import os
import re
import time
import unittest
from pathlib import Path

from kilntest import SourceTestCase

DAY = 86400
MAGIC = b"kiln-object 1 "


class CacheGcTest(SourceTestCase):
    def build(self, cache, summary):
        manifest = self.project / "manifests" / "demo" / "1.0.0.toml"
        text = manifest.read_text()
        manifest.write_text(re.sub(r'summary = "[^"]*"', f'summary = "{summary}"', text))
        proc = self.kiln("--cache", str(cache), "--json", "build", "demo", check=0)
        return json.loads(proc.stdout)["items"][0]

    def gc(self, cache, *args, check=0):
        return self.kiln("--cache", str(cache), "--json", "cache", "gc", *args, check=check)

    def entry_bytes(self, cache, key):
        return sum(f.lstat().st_size for f in (cache / "wheels" / key).iterdir())

    def add_object(self, cache, payload, suffix=".o"):
        key = hashlib.sha256(payload + suffix.encode()).hexdigest()
        path = cache / "objects" / key[:2] / f"{key}{suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        return path

    def used(self, path, ago):
        when = time.time() - ago
        os.utime(path, (when, when), follow_symlinks=False)

    def test_evicts_by_age_then_by_size_least_recently_used_first(self):
        self.local_archive("demo-1.0.0.tar.gz", self.good_sdist())
        cache = self.fresh_cache("c")
        k1 = self.build(cache, "one")["key"]
        k2 = self.build(cache, "two")["key"]
        k3 = self.build(cache, "three")["key"]
        self.assertEqual(len({k1, k2, k3}), 3)
        # A cache hit marks the entry used: it becomes the package's last build (served) too.
        self.used(cache / "wheels" / k1 / "entry.json", 60 * DAY)
        hit = self.build(cache, "one")
        self.assertTrue(hit["cache_hit"])
        self.assertGreater((cache / "wheels" / k1 / "entry.json").stat().st_mtime, time.time() - 600)
        a = self.add_object(cache, b"a" * 3000)
        b = self.add_object(cache, b"b" * 2000, ".dev")
        c = self.add_object(cache, b"c" * 1000, ".deps")
        for path, ago in ((cache / "wheels" / k2 / "entry.json", 40 * DAY), (a, 40 * DAY),
                          (cache / "wheels" / k1 / "entry.json", 20 * DAY), (b, 10 * DAY),
                          (cache / "wheels" / k3 / "entry.json", 2 * DAY), (c, 3600)):
            self.used(path, ago)
        wheel_bytes = {k: self.entry_bytes(cache, k) for k in (k1, k2, k3)}
        a_bytes = a.stat().st_size

        # Age: k2 and a (40 days) go; the served k1 (20 days) stays.
        out = json.loads(self.gc(cache, "--max-age", "30d").stdout)
        self.assertEqual((out["removed_wheels"], out["removed_objects"]), (1, 1), out)
        self.assertEqual(out["freed_bytes"], wheel_bytes[k2] + a_bytes)
        self.assertEqual(out["kept_locked"], [])
        self.assertFalse((cache / "wheels" / k2).exists())
        self.assertFalse(a.exists())
        self.assertEqual(sorted(p.name for p in (cache / "wheels").iterdir()), sorted([k1, k3]))
        self.assertTrue(b.exists() and c.exists())
        remaining = wheel_bytes[k1] + wheel_bytes[k3] + b.stat().st_size + c.stat().st_size
        self.assertEqual(out["remaining_bytes"], remaining)
        self.assertIn("other_bytes", out)

        # Size: least recently used first, k1 (20 days) then b (10 days), until k3 and c fit.
        limit = wheel_bytes[k3] + c.stat().st_size
        text = self.kiln("--cache", str(cache), "cache", "gc", "--max-size", str(limit), check=0).stderr
        self.assertRegex(text, r"kiln: removed 2 items \(0\.0 MiB freed\); cache now 0\.0 MiB of wheels "
                               r"and objects")
        self.assertEqual([p.name for p in (cache / "wheels").iterdir()], [k3])
        self.assertFalse(b.exists())
        self.assertTrue(c.exists())
        # Nothing outside wheels/ and objects/ went: the shared folders are still the links they were.
        for part in ("downloads", "sysroots", "toolkits", "envs"):
            self.assertTrue((cache / part).is_symlink(), part)
        self.assertTrue((cache / "last" / "default" / "demo.json").exists())

        # The last build's record names k1, which is gone: everything still reads the cache, and
        # the index serves the file name's other entry.
        self.kiln("--cache", str(cache), "cache", "verify", check=0)
        listed = json.loads(self.kiln("--cache", str(cache), "--json", "cache", "ls", check=0).stdout)
        self.assertEqual([(e["key"], e["served"]) for e in listed], [(k3, True)])
        site = self.tmp / "site"
        self.kiln("--cache", str(cache), "index", "export", str(site), check=0)
        exported = list((site / "default" / "simple" / "demo").glob("*.whl"))
        self.assertEqual(len(exported), 1)
        self.assertEqual(hashlib.sha256(exported[0].read_bytes()).hexdigest(), listed[0]["sha256"])

        # An entry a build holds is kept and named; the rest goes.
        (cache / "locks").mkdir(exist_ok=True)
        with open(cache / "locks" / f"{k3}.lock", "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            out = json.loads(self.gc(cache, "--max-size", "0", "--max-age", "0s").stdout)
        self.assertEqual(out["kept_locked"], [k3])
        self.assertEqual((out["removed_wheels"], out["removed_objects"]), (0, 1), out)
        self.assertEqual(out["remaining_bytes"], wheel_bytes[k3])
        self.assertTrue((cache / "wheels" / k3).is_dir())
        self.assertFalse(c.exists())
        out = json.loads(self.gc(cache, "--max-size", "0").stdout)
        self.assertEqual((out["removed_wheels"], out["remaining_bytes"]), (1, 0), out)
        self.kiln("--cache", str(cache), "cache", "verify", check=0)
        self.kiln("--cache", str(cache), "index", "export", str(self.tmp / "empty-site"), check=0)

    def test_all_counts_what_it_frees(self):
        """`gc --all` says how much it freed: it once said "0.0 MiB freed" after removing 6.5 MB."""
        self.local_archive("demo-1.0.0.tar.gz", self.good_sdist())
        cache = self.fresh_cache("c")
        key = self.build(cache, "one")["key"]
        obj = self.add_object(cache, b"o" * 5000)
        expected = self.entry_bytes(cache, key) + obj.stat().st_size
        out = json.loads(self.gc(cache, "--all", check=0).stdout)
        self.assertEqual(out["freed_bytes"], expected, out)
        self.assertFalse((cache / "wheels" / key).exists())
        key = self.build(cache, "two")["key"]
        self.add_object(cache, b"p" * (1 << 20))
        text = self.kiln("--cache", str(cache), "cache", "gc", "--all", check=0).stderr
        self.assertRegex(text, r"removed 2 items \(1\.[0-9] MiB freed\)")

    def test_bad_sizes_and_ages_are_usage_errors(self):
        cache = self.tmp / "cache"
        cases = [
            (["--max-size", "12X"], "--max-size: '12X' is not a size"),
            (["--max-size", "1.5"], "--max-size: '1.5' is not a size"),
            (["--max-size", "-1G"], "--max-size: '-1G' is not a size"),
            (["--max-size", "99999999999999999999T"], "is not a size"),
            (["--max-size", "9" * 5000], "is not a size"),
            (["--max-age", "1y"], "--max-age: '1y' is not an age"),
            (["--max-age", "30"], "--max-age: '30' is not an age"),
            (["--max-age", "1.5d"], "--max-age: '1.5d' is not an age"),
            (["--all", "--max-size", "1G"], "--all excludes --max-size"),
            (["--max-age", "1d", "--all"], "excludes"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                proc = self.kiln("--cache", str(cache), "cache", "gc", *args, check=2)
                self.assertIn(message, proc.stderr)
                self.assertTrue(proc.stderr.startswith("kiln: error: "), proc.stderr)
                self.assertLess(len(proc.stderr), 1000)
        self.assertFalse(cache.exists())


if __name__ == "__main__":
    unittest.main()
