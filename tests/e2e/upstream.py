"""A local PyPI-like package index for end-to-end tests: tiny pure stand-in wheels (valid ones,
made with zipfile) served as PEP 503 HTML pages from a ThreadingHTTPServer in a thread, every
request path recorded.

`pypi()` offers what kiln's shipped packages need besides kiln's own wheels: torch 2.11.0 and
2.11.1 (stand-ins: `torch/version.py` says the version and CUDA 13.0, nothing else), packaging,
ninja, einops and transformers 5.6.2, and for mamba-ssm triton, tilelang, apache-tvm-ffi,
quack-kernels and setuptools, none with dependencies. `cu128_torch()` is a PyTorch-style
index that offers only torch 2.11.0+cu128. PyPI's pages link to files by absolute URL (as PyPI's
do, on another host); the torch index links them by absolute path (`/files/…`, as
download.pytorch.org does), which a client must resolve against the page it was redirected to."""

import base64
import hashlib
import html
import http.server
import io
import re
import threading
import urllib.parse
import zipfile
from pathlib import Path

EPOCH = (1980, 1, 1, 0, 0, 0)


def normalize(name):
    """PEP 503."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _record_hash(data):
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


class Wheel:
    """A pure py3-none-any wheel with METADATA 2.1, WHEEL and RECORD (sha256 of every file)."""

    def __init__(self, name, version, modules, requires=()):
        self.name = name
        self.project = normalize(name)
        self.version = version
        dist = re.sub(r"[-_.]+", "_", name)
        self.filename = f"{dist}-{version}-py3-none-any.whl"
        info = f"{dist}-{version}.dist-info"
        metadata = "".join([f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                            f"Summary: a stand-in for {name} (kiln's tests)\n",
                            *(f"Requires-Dist: {r}\n" for r in requires)])
        files = dict(modules)
        files[f"{info}/METADATA"] = metadata
        files[f"{info}/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: kiln-tests\nRoot-Is-Purelib: true\n"
                                  "Tag: py3-none-any\n")
        record = "".join(f"{path},sha256={_record_hash(data.encode())},{len(data.encode())}\n"
                         for path, data in files.items())
        files[f"{info}/RECORD"] = record + f"{info}/RECORD,,\n"
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            for path, data in files.items():
                zi = zipfile.ZipInfo(path, EPOCH)
                zi.external_attr = 0o644 << 16
                zi.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(zi, data)
        self.data = buf.getvalue()
        self.sha256 = hashlib.sha256(self.data).hexdigest()

    def write(self, directory):
        path = Path(directory) / self.filename
        path.write_bytes(self.data)
        return path


def torch_wheel(version, cuda):
    return Wheel("torch", version, {
        "torch/__init__.py": f'"""A stand-in for torch (kiln\'s tests): no code."""\n__version__ = "{version}"\n',
        "torch/version.py": f'__version__ = "{version}"\ncuda = "{cuda}"\n',
    })


def plain_wheel(name, version):
    module = re.sub(r"[-.]+", "_", name).lower()
    return Wheel(name, version, {f"{module}/__init__.py": f'__version__ = "{version}"\n'})


# What mamba-ssm requires besides the above (stand-ins as well).
MAMBA_SSM_NEEDS = {"triton": "3.6.0", "tilelang": "0.1.8", "apache-tvm-ffi": "0.1.9",
                   "quack-kernels": "0.3.4", "setuptools": "80.9.0"}


def pypi_wheels():
    return [torch_wheel("2.11.0", "13.0"), torch_wheel("2.11.1", "13.0"),
            plain_wheel("packaging", "25.0"), plain_wheel("ninja", "1.13.0"),
            plain_wheel("einops", "0.8.1"), plain_wheel("transformers", "5.6.2"),
            *(plain_wheel(n, v) for n, v in MAMBA_SSM_NEEDS.items())]


class Upstream:
    """A PEP 503 index of `wheels` at `url` (http://HOST:PORT/simple/), files under /files/.
    `links`: "absolute" (http://<Host header>/files/…, as PyPI) or "path" (/files/…, as
    download.pytorch.org). `requests` lists every request path, in order, `authorizations` every
    Authorization header it was sent."""

    def __init__(self, wheels, host="127.0.0.1", port=0, links="absolute"):
        self.wheels = list(wheels)
        self.by_file = {w.filename: w for w in self.wheels}
        self.projects = {}
        for w in self.wheels:
            self.projects.setdefault(w.project, []).append(w)
        self.links = links
        self.requests = []
        self.authorizations = []  # every Authorization header received
        self._lock = threading.Lock()
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                self.do_GET(head=True)

            def do_GET(self, head=False):
                with upstream._lock:
                    upstream.requests.append(self.path)
                    if self.headers.get("Authorization"):
                        upstream.authorizations.append(self.headers["Authorization"])
                status, headers, body = upstream.answer(self.path, self.headers.get("Host", ""))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.host = host
        self.port = self.server.server_address[1]
        self.base = f"http://{host}:{self.port}/"
        self.url = f"{self.base}simple/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.stopped = False

    def answer(self, path, host):
        path = urllib.parse.urlsplit(path).path
        html_type = {"Content-Type": "text/html; charset=utf-8"}
        if path == "/simple/":
            links = "".join(f'<a href="{p}/">{p}</a>\n' for p in sorted(self.projects))
            return 200, html_type, f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n".encode()
        m = re.fullmatch(r"/simple/([^/]+)/?", path)
        if m:
            name = urllib.parse.unquote(m.group(1))
            if normalize(name) != name or not path.endswith("/"):
                return 301, {"Location": f"/simple/{normalize(name)}/"}, b""
            if name not in self.projects:
                return 404, {"Content-Type": "text/plain"}, b"no such project\n"
            prefix = f"http://{host}/files/" if self.links == "absolute" else "/files/"
            anchors = "".join(
                f'<a href="{prefix}{urllib.parse.quote(w.filename)}#sha256={w.sha256}">'
                f"{html.escape(w.filename)}</a><br/>\n" for w in self.projects[name])
            body = f"<!DOCTYPE html>\n<html><body>\n<h1>Links for {name}</h1>\n{anchors}</body></html>\n"
            return 200, html_type, body.encode()
        m = re.fullmatch(r"/files/([^/]+)", path)
        if m and urllib.parse.unquote(m.group(1)) in self.by_file:
            w = self.by_file[urllib.parse.unquote(m.group(1))]
            return 200, {"Content-Type": "application/octet-stream"}, w.data
        return 404, {"Content-Type": "text/plain"}, b"not found\n"

    def project_requests(self):
        """The projects whose pages were asked for (normalised), in order, with repeats."""
        with self._lock:
            paths = list(self.requests)
        out = []
        for p in paths:
            m = re.fullmatch(r"/simple/([^/?]+)/?(\?.*)?", p)
            if m:
                out.append(normalize(urllib.parse.unquote(m.group(1))))
        return out

    def file_requests(self):
        with self._lock:
            return [urllib.parse.unquote(p[len("/files/"):]) for p in self.requests if p.startswith("/files/")]

    def sha256s(self, project):
        return {w.sha256 for w in self.projects.get(normalize(project), [])}

    def stop(self):
        if not self.stopped:
            self.stopped = True
            self.server.shutdown()
            self.server.server_close()


def pypi(host="127.0.0.1", port=0):
    """The PyPI stand-in: every dependency of kiln's default packages, torch 2.11.0 and 2.11.1."""
    return Upstream(pypi_wheels(), host=host, port=port, links="absolute")


def cu128_torch(host="127.0.0.1", port=0):
    """A PyTorch-style CUDA 12.8 index: only torch 2.11.0+cu128, linked by absolute path."""
    return Upstream([torch_wheel("2.11.0+cu128", "12.8")], host=host, port=port, links="path")
