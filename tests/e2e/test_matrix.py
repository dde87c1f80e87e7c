"""The matrix as data, run across machines: `kiln resolve --github-matrix` writes one job per
(target, package) with its build key; each job is a `kiln build … --expect-key KEY` with a cache of
its own; `kiln index export` assembles one index from several caches (--from) or from the remote
cache (the plan's wheels, validated, never built). The last test runs the matrix as a job array of
a real one-node Slurm cluster (tests/support/services.py) sharing a real Redis, and checks that the
exported index equals a one-machine build's, wheel for wheel, byte for byte.
"""

import json
import os
import sys
from pathlib import Path

from kilntest import KILN, KilnTestCase

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import services  # noqa: E402

# A Slurm array task: job SLURM_ARRAY_TASK_ID of the matrix, built with the cache made for it.
TASK = """#!/bin/bash
set -euo pipefail
i=$SLURM_ARRAY_TASK_ID
read -r package target key < <(python3 -c '
import json, sys
job = json.load(open(sys.argv[1]))["include"][int(sys.argv[2])]
print(job["package"], job["target"], job["key"])' "$MATRIX" "$i")
cd "$PROJECT"
KILN_CACHE=$WORK/task-$i "$KILN" --json build "$package" --target "$target" --expect-key "$key" \\
  --remote-cache "$REMOTE" > "$WORK/task-$i.json"
"""


def tree(root):
    """{relative path: bytes} of every file under root, JSON pages without their upload times."""
    out = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix == ".json":
            page = json.loads(data)
            for f in page.get("files", []):
                f.pop("upload-time", None)
            data = json.dumps(page, sort_keys=True).encode()
        out[str(path.relative_to(root))] = data
    return out


class MatrixTest(KilnTestCase):
    def target_file(self, name, archs):
        """A target like the default one with other archs, as a file (the matrix names it so)."""
        text = (self.project / "manifests" / "targets" / "default.toml").read_text()
        path = self.tmp / f"{name}.toml"
        path.write_text(text.replace('archs = "9.0"', f'archs = "{archs}"', 1))
        self.assertNotEqual(path.read_text(), text)
        return str(path)

    def matrix(self, *targets):
        args = [a for t in targets for a in ("--target", t)]
        out = self.kiln("resolve", "kiln-demo", *args, "--github-matrix", check=0).stdout
        self.assertEqual(out.count("\n"), 1, "one line, for $GITHUB_OUTPUT")
        plan = json.loads(self.kiln("--json", "resolve", "kiln-demo", *args, check=0).stdout)
        jobs = json.loads(out)["include"]
        self.assertEqual([j["key"] for j in jobs], [i["key"] for i in plan["items"]])
        self.assertEqual([j["target"] for j in jobs], list(targets))
        return jobs

    def test_matrix_jobs_each_with_a_cache_merge_into_one_index(self):
        sm80 = self.target_file("sm80", "8.0;9.0")
        jobs = self.matrix("default", sm80)
        self.assertEqual(jobs[0]["package"], "kiln-demo==0.1.0")
        self.assertEqual(jobs[0]["archs"], "")
        caches = []
        for i, job in enumerate(jobs):
            cache = self.fresh_cache(f"job-{i}")
            out = json.loads(self.kiln("--json", "build", job["package"], "--target", job["target"],
                                       "--expect-key", job["key"], check=0,
                                       env={"KILN_CACHE": str(cache)}).stdout)
            self.assertEqual(out["items"][0]["key"], job["key"])
            caches.append(cache)

        # A runner that resolves another key says so before building anything.
        wrong = self.kiln("build", jobs[0]["package"], "--target", jobs[0]["target"],
                          "--expect-key", jobs[1]["key"], check=2,
                          env={"KILN_CACHE": str(caches[0])})
        self.assertIn(f"not {jobs[1]['key']} as expected", wrong.stderr)

        site = self.tmp / "site"
        args = [a for c in caches for a in ("--from", str(c))]
        out = json.loads(self.kiln("--json", "index", "export", str(site), *args, check=0).stdout)
        self.assertEqual((out["targets"], out["files"]), (2, 2))
        for target, cache in (("default", caches[0]), ("sm80", caches[1])):
            page = json.loads((site / target / "simple" / "kiln-demo" / "index.json").read_text())
            [wheel] = [f["filename"] for f in page["files"]]
            [built] = list((cache / "wheels").glob(f"*/{wheel}"))
            self.assertEqual((site / target / "simple" / "kiln-demo" / wheel).read_bytes(),
                             built.read_bytes())

        # The plan's wheels from a cache that lacks one: an error naming it, nothing exported.
        missing = self.kiln("index", "export", str(self.tmp / "partial"), "kiln-demo",
                            "--target", "default", "--target", sm80, check=1,
                            env={"KILN_CACHE": str(caches[0])})
        self.assertIn("kiln-demo 0.1.0 for target sm80", missing.stderr)
        self.assertIn("is not in the local cache; build it first", missing.stderr)
        self.assertFalse((self.tmp / "partial").exists())

    def test_a_matrix_beyond_githubs_limit_is_refused(self):
        text = (self.project / "manifests" / "targets" / "default.toml").read_text()
        args = []
        for i in range(257):
            (self.tmp / f"t{i}.toml").write_text(text)
            args += ["--target", str(self.tmp / f"t{i}.toml")]
        ok = self.kiln("resolve", "flash-linear-attention", *args[:512], "--github-matrix",
                       check=0)
        self.assertEqual(len(json.loads(ok.stdout)["include"]), 256)
        refused = self.kiln("resolve", "flash-linear-attention", *args, "--github-matrix", check=2)
        self.assertIn("the plan has 257 items; a GitHub Actions matrix runs at most 256 jobs",
                      refused.stderr)

    def start(self, cls, *args):
        try:
            service = cls(self.tmp / cls.name, *args)
        except services.ServiceMissing as e:
            raise self.failureException(str(e)) from None
        self.addCleanup(service.stop)
        return service

    def test_slurm_job_array_over_a_remote_equals_one_machine(self):
        targets = ("default", self.target_file("sm80", "8.0;9.0"),
                   self.target_file("sm120", "9.0;12.0"))
        jobs = self.matrix(*targets)
        matrix = self.tmp / "matrix.json"
        matrix.write_text(json.dumps({"include": jobs}))
        redis = self.start(services.Redis)
        slurm = self.start(services.Slurm)
        for i in range(len(jobs)):
            self.fresh_cache(f"task-{i}")
        tasks = slurm.sbatch_array(TASK, len(jobs), timeout=1200, env={
            "MATRIX": str(matrix), "WORK": str(self.tmp), "PROJECT": str(self.project),
            "KILN": KILN, "REMOTE": redis.url})
        for task in tasks:
            self.assertEqual((task.state, task.exit_code), ("COMPLETED", 0),
                             task.output.read_text(errors="replace")[-3000:])
        built = [json.loads((self.tmp / f"task-{i}.json").read_text()) for i in range(len(jobs))]
        self.assertEqual([b["items"][0]["key"] for b in built], [j["key"] for j in jobs])
        self.assertTrue(all(b["stores"]["remote"]["stores"] > 0 for b in built))

        # The index assembled from the remote by a machine with an empty cache…
        target_args = [a for t in targets for a in ("--target", t)]
        remote_site = self.tmp / "from-remote"
        agg = self.fresh_cache("aggregate")
        self.kiln("index", "export", str(remote_site), "kiln-demo", *target_args,
                  "--remote-cache", redis.url, "--remote-cache-readonly", check=0,
                  env={"KILN_CACHE": str(agg)})
        # …equals one machine's build of the whole matrix.
        one = self.fresh_cache("one")
        self.kiln("build", "kiln-demo", *target_args, check=0, env={"KILN_CACHE": str(one)})
        one_site = self.tmp / "one-machine"
        self.kiln("index", "export", str(one_site), check=0, env={"KILN_CACHE": str(one)})
        ours, theirs = tree(remote_site), tree(one_site)
        self.assertEqual(sorted(ours), sorted(theirs))
        self.assertEqual(len([p for p in ours if p.endswith(".whl")]), len(jobs))
        for path in ours:
            self.assertEqual(ours[path], theirs[path], path)
