"""The differential test's corpus: real wheels' METADATA files from PyPI (PEP 658 `.metadata`
files, not the wheels), pinned by tests/differential/corpus.txt (project, file name, sha256 of the
metadata file, its URL) and fetched once into ~/.cache/kiln/differential/<sha256>.metadata.

`python3 corpus.py pin PROJECT[==VERSION] ...` adds to corpus.txt from PyPI's JSON simple API
(the first matching wheel with core-metadata per project); `python3 corpus.py fetch` fills the
cache, checking each file's sha256."""

import hashlib
import json
import os
import sys
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
PINS = HERE / "corpus.txt"
CACHE = Path(os.environ.get("KILN_DIFFERENTIAL_CACHE", Path.home() / ".cache/kiln/differential"))
ACCEPT = "application/vnd.pypi.simple.v1+json"


def get(url, accept=None):
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read()


def pins():
    rows = []
    for line in PINS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            project, filename, sha, url = line.split()
            rows.append((project, filename, sha, url))
    return rows


def fetch():
    """{file name: METADATA text} for every pin, downloaded once (sha256-checked) into CACHE."""
    CACHE.mkdir(parents=True, exist_ok=True)
    out = {}
    for project, filename, sha, url in pins():
        path = CACHE / f"{sha}.metadata"
        if not path.exists():
            data = get(url)
            if hashlib.sha256(data).hexdigest() != sha:
                raise RuntimeError(f"{url}: sha256 differs from the pinned {sha}")
            tmp = path.with_suffix(".part")
            tmp.write_bytes(data)
            tmp.rename(path)
        out[filename] = path.read_bytes().decode("utf-8", "surrogateescape")
    return out


def pin(specs):
    rows = [" ".join(r) for r in pins()] if PINS.exists() else []
    for spec in specs:
        project, _, version = spec.partition("==")
        page = json.loads(get(f"https://pypi.org/simple/{project}/", ACCEPT))
        files = [f for f in page["files"] if f["filename"].endswith(".whl")
                 and f.get("core-metadata", True) and not f.get("yanked")]
        if version:
            files = [f for f in files if f["filename"].split("-")[1] == version]
        files.sort(key=lambda f: f.get("upload-time") or "")
        if not files:
            print(f"{spec}: no wheel", file=sys.stderr)
            continue
        data = None
        for f in reversed(files[-8:]):  # the newest file whose .metadata is served
            try:
                data = get(f["url"] + ".metadata")
                break
            except OSError as e:
                print(f"{spec}: {f['filename']}: {e}", file=sys.stderr)
        if data is None:
            continue
        sha = hashlib.sha256(data).hexdigest()
        if any(r.split()[1] == f["filename"] for r in rows):
            continue
        rows.append(f"{project} {f['filename']} {sha} {f['url']}.metadata")
        print(rows[-1].split()[1], file=sys.stderr)
    PINS.write_text("# project wheel sha256-of-METADATA url (tests/differential/corpus.py)\n" +
                    "\n".join(rows) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "pin":
        pin(sys.argv[2:])
    else:
        print(len(fetch()), "metadata files in", CACHE)
