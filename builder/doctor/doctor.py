#!/usr/bin/env python3
"""kiln doctor, the Python half: what this GPU host has, and what it needs for transformers'
Gated DeltaNet fast path (causal-conv1d and flash-linear-attention built for its torch and GPUs)
and for its Mamba-2 fast path (causal-conv1d and mamba-ssm).

Stdlib only, Python >= 3.8. Runs alone on any host (no kiln, no compiler), e.g.

    curl -s http://buildhost:8000/doctor.py | python3 - [--json] [--server http://buildhost:8000]

and inside `kiln doctor`, which runs it with the chosen interpreter and adds the static checks of
the installed binaries (docs/doctor.md). Reports the interpreter, glibc, torch, Triton,
transformers, the NVIDIA driver and GPUs (libcuda.so.1 through ctypes; --libcuda or KILN_LIBCUDA
names another library: a test and diagnostic hook), causal-conv1d, fla, mamba-ssm and every wheel
kiln built (imports, built for this torch), both fast paths, and the next commands: with
--server (or KILN_SERVER), from the index of a target that server serves for this host, when one
fits (it asks the server for its list of targets). Nothing is installed or written. Exit status:
0 when the Gated DeltaNet fast path is ready, 1 when not, 2 on bad arguments (the Mamba-2 line
informs, it does not decide).
"""

import argparse
import base64
import ctypes
import itertools
import json
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import threading
import urllib.parse
import urllib.request

DOCTOR_VERSION = 1

MAX_TEXT = 4 << 20  # bytes read from any file of an installed distribution
MAX_DIST_INFOS = 20000  # directory entries looked at per site directory
MAX_RECORD_ROWS = 100000
MAX_PROBE_OUTPUT = 4 << 20

# Distributions the fast path needs (and their import names); the PyPI names kiln builds.
CAUSAL_CONV1D = "causal-conv1d"
FLA_NAMES = ("flash-linear-attention", "fla-core")
MAMBA_SSM = "mamba-ssm"
WATCHED = ("torch", "triton", "transformers", CAUSAL_CONV1D, MAMBA_SSM) + FLA_NAMES
# What a distribution's import check imports (kiln's other wheels: their top-level modules).
IMPORTS = {CAUSAL_CONV1D: ["causal_conv1d", "causal_conv1d_cuda"],
           MAMBA_SSM: ["mamba_ssm", "selective_scan_cuda", "mamba_ssm.ops.triton.ssd_combined",
                       "mamba_ssm.ops.triton.selective_state_update"]}
# The kernels transformers' Mamba-2 layers (Mamba2, NemotronH, Falcon-H1, Granite 4.0-H, Zamba2)
# take from the packages, each with a torch fallback.
MAMBA2_KERNELS = ("causal_conv1d_fn", "causal_conv1d_update", "mamba_chunk_scan_combined",
                  "mamba_split_conv1d_scan_combined", "selective_state_update")
# What each fast path needs built and installed, in the order the commands name them.
PATH_PACKAGES = {"fast_path": ("causal-conv1d", "flash-linear-attention"),
                 "mamba2_fast_path": ("causal-conv1d", "mamba-ssm")}
# What a package of a fast path needs from the same index besides itself (kiln's own names: the
# index answers for them itself, so a target without them cannot install the package).
SERVED_WITH = {"flash-linear-attention": ("fla-core",)}
FLA_HOPPER_TRITON = (3, 7, 1)  # fla's gated chunk backward on Hopper needs Triton >= 3.7.1

# --server: the targets `kiln serve` lists at "/" (PEP 691's JSON type), read from a stranger.
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
MAX_TARGETS_BYTES = 4 << 20
SERVER_DEADLINE = 10  # seconds for the whole exchange, name resolution included
MAX_SERVED_TARGETS = 1000
MAX_SERVED_PROJECTS = 10000
MAX_SERVED_LIST = 1000
# A target name as kiln serves one (index::is_valid_target_name): one URL path segment, one shell
# word that needs no quoting. Any other name from the server is left out.
TARGET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}\Z")
# A version, tag, arch or project name from the server: anything else is taken as not stated.
SERVED_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}\Z")

# CUdevice_attribute: compute capability major and minor.
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


def normalize(name):
    out = []
    for c in name.lower():
        out.append("-" if c in "._-" else c)
    text = "".join(out)
    while "--" in text:
        text = text.replace("--", "-")
    return text


def read_text(path, limit=MAX_TEXT):
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    if len(data) > limit:
        return None
    return data.decode("utf-8", "replace")


def version_tuple(text):
    parts = []
    for piece in (text or "").split("+")[0].split("."):
        digits = ""
        for c in piece:
            if not c.isdigit():
                break
            digits += c
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


# --- the interpreter ---------------------------------------------------------------------------


def interpreter():
    v = sys.version_info
    tag = "cp%d%d" % (v[0], v[1])
    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    return {
        "executable": sys.executable,
        "version": "%d.%d.%d" % (v[0], v[1], v[2]),
        "implementation": sys.implementation.name,
        "python_tag": tag,
        "abi_tag": tag + ("t" if free_threaded else ""),
        "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX") or "",
        "platform": sysconfig.get_platform(),
    }


def glibc_version():
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):
        text = ""
    return text.split()[1] if text.startswith("glibc ") and len(text.split()) == 2 else None


# --- installed distributions -------------------------------------------------------------------


def site_dirs():
    seen, out = set(), []
    for entry in sys.path:
        if not entry:
            continue  # the current directory: not where distributions are installed
        path = os.path.realpath(entry)
        if path not in seen and os.path.isdir(path):
            seen.add(path)
            out.append(path)
    return out


def metadata_fields(text):
    fields = {}
    for line in text.splitlines():
        if not line.strip():
            break
        if ":" in line and not line[0].isspace():
            key, value = line.split(":", 1)
            fields.setdefault(key.strip().lower(), value.strip())
    return fields


def top_level_modules(record_text):
    """The top-level import names a RECORD installs (packages, modules, extensions)."""
    names = set()
    rows = record_text.splitlines()[:MAX_RECORD_ROWS]
    for row in rows:
        path = row.split(",", 1)[0].strip().strip('"')
        if not path or path.startswith("/") or path.startswith(".."):
            continue
        first = path.split("/", 1)[0]
        if first.endswith(".dist-info") or first.endswith(".data") or first == "__pycache__":
            continue
        if "/" in path:
            if path.endswith("/__init__.py"):
                names.add(first)
            continue
        if first.endswith(".py"):
            names.add(first[:-3])
        elif first.endswith(".so"):
            names.add(first.split(".", 1)[0])
    return sorted(n for n in names if n.isidentifier())


def distributions():
    """Installed distributions by normalised name: the first one on sys.path wins, as for import."""
    found = {}
    for site in site_dirs():
        try:
            entries = sorted(os.listdir(site))[:MAX_DIST_INFOS]
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith(".dist-info"):
                continue
            path = os.path.join(site, entry)
            text = read_text(os.path.join(path, "METADATA"))
            if text is None:
                continue
            fields = metadata_fields(text)
            name = fields.get("name")
            if not name or normalize(name) in found:
                continue
            dist = {"name": name, "version": fields.get("version", ""), "site": site,
                    "dist_info": path, "kiln": os.path.isfile(os.path.join(path, "kiln.json"))}
            found[normalize(name)] = dist
    return found


def kiln_provenance(dist):
    text = read_text(os.path.join(dist["dist_info"], "kiln.json"))
    try:
        doc = json.loads(text) if text else None
    except (ValueError, RecursionError):  # a stranger's file: malformed, or nested too deep
        doc = None
    if not isinstance(doc, dict):
        return {"error": "kiln.json does not read"}
    tools = doc.get("tools") if isinstance(doc.get("tools"), dict) else {}
    torch = tools.get("torch") if isinstance(tools.get("torch"), dict) else {}
    out = {"kiln": doc.get("kiln"), "target": doc.get("target"), "archs": doc.get("archs"),
           "torch": torch.get("version")}
    return {k: v for k, v in out.items() if isinstance(v, str)}


# --- torch, without importing it ---------------------------------------------------------------


def torch_files(dist):
    """torch's version and CUDA from torch/version.py, as kiln reads them (no import)."""
    text = read_text(os.path.join(dist["site"], "torch", "version.py")) or ""
    facts = {}
    for line in text.splitlines():
        for name in ("__version__", "cuda"):
            head = line.split("=", 1)[0].split(":", 1)[0].strip()
            if head == name and "=" in line and name not in facts:
                value = line.split("=", 1)[1].strip()
                if len(value) >= 2 and value[0] in "'\"" and value[-1] == value[0]:
                    facts[name] = value[1:-1]
    return facts.get("__version__"), facts.get("cuda")


# --- the driver (libcuda.so.1 through ctypes) --------------------------------------------------


def loaded_path(lib, symbol):
    """The file a symbol of a loaded library comes from (dladdr)."""

    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]

    for name in (None, "libdl.so.2"):
        try:
            dladdr = ctypes.CDLL(name).dladdr
        except (OSError, AttributeError):
            continue
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
        info = DlInfo()
        if dladdr(ctypes.cast(getattr(lib, symbol), ctypes.c_void_p), ctypes.byref(info)):
            return os.fsdecode(info.dli_fname) if info.dli_fname else None
    return None


def driver_release(libcuda_path, overridden):
    """The driver's release ("580.159.04"): /proc/driver/nvidia/version, else libcuda's file name."""
    if not overridden:
        text = read_text("/proc/driver/nvidia/version", 65536) or ""
        for word in text.split():
            if version_tuple(word) and word.count(".") >= 1 and word[0].isdigit():
                return word
    if libcuda_path:
        base = os.path.basename(os.path.realpath(libcuda_path))
        if base.startswith("libcuda.so.") and base.count(".") >= 3:
            return base[len("libcuda.so."):]
    return None


def cuda_error(lib, code):
    try:
        text = ctypes.c_char_p()
        lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        if lib.cuGetErrorString(code, ctypes.byref(text)) == 0 and text.value:
            return "%s (CUresult %d)" % (text.value.decode("utf-8", "replace"), code)
    except (AttributeError, OSError):
        pass
    return "CUresult %d" % code


def gpus_of(lib):
    count = ctypes.c_int(0)
    rc = lib.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0:
        raise RuntimeError("cuDeviceGetCount: " + cuda_error(lib, rc))
    gpus = []
    for i in range(min(count.value, 64)):
        dev = ctypes.c_int(0)
        rc = lib.cuDeviceGet(ctypes.byref(dev), i)
        if rc != 0:
            raise RuntimeError("cuDeviceGet(%d): %s" % (i, cuda_error(lib, rc)))
        name = ctypes.create_string_buffer(256)
        lib.cuDeviceGetName(name, 256, dev)
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        lib.cuDeviceGetAttribute(ctypes.byref(major), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        lib.cuDeviceGetAttribute(ctypes.byref(minor), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
        gpus.append({"index": i, "name": name.value.decode("utf-8", "replace"),
                     "cc": "%d.%d" % (major.value, minor.value),
                     "sm": "sm_%d%d" % (major.value, minor.value)})
    return gpus


def driver(libcuda):
    """The driver through libcuda: its CUDA version and each GPU's name and compute capability."""
    overridden = bool(libcuda)
    name = libcuda or "libcuda.so.1"
    out = {"available": False, "libcuda": None, "release": None, "cuda": None, "error": None}
    try:
        lib = ctypes.CDLL(name)
    except OSError as e:
        out["error"] = "cannot load %s: %s" % (name, e)
        return out, []
    out["libcuda"] = loaded_path(lib, "cuInit") or name
    out["release"] = driver_release(out["libcuda"], overridden)
    version = ctypes.c_int(0)
    if lib.cuDriverGetVersion(ctypes.byref(version)) == 0 and version.value > 0:
        out["cuda"] = "%d.%d" % (version.value // 1000, version.value % 1000 // 10)
    rc = lib.cuInit(0)
    if rc != 0:
        out["error"] = "cuInit: " + cuda_error(lib, rc)
        return out, []
    try:
        gpus = gpus_of(lib)
    except RuntimeError as e:
        out["error"] = str(e)
        return out, []
    out["available"] = bool(gpus)
    if not gpus:
        out["error"] = "the driver sees no GPU"
    return out, gpus


# --- imports, in a child interpreter -----------------------------------------------------------

PROBE = r'''
import json, logging, sys, traceback
plan = json.loads(sys.argv[1])

def emit(**kw):
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()

def attempt(step, fn):
    emit(step=step, state="start")
    try:
        extra = fn() or {}
        emit(step=step, state="done", ok=True, **extra)
        return True
    except BaseException as e:
        lines = [l for l in traceback.format_exception_only(type(e), e)[-1].strip().splitlines() if l]
        emit(step=step, state="done", ok=False, error=(lines[-1] if lines else type(e).__name__)[:2000])
        return False

def torch_step():
    import torch
    return {"version": torch.__version__, "cuda": torch.version.cuda,
            "cuda_available": bool(torch.cuda.is_available())}

have_torch = attempt("torch", torch_step) if plan["torch"] else False

def imports(mods):
    def run():
        import importlib
        for m in mods:
            importlib.import_module(m)
    return run

for name, mods in plan["imports"]:
    attempt("import:" + name, imports(mods))

def conv_run():
    import torch
    from causal_conv1d import causal_conv1d_fn
    x = torch.randn(1, 8, 16, device="cuda", dtype=torch.float32)
    w = torch.randn(8, 4, device="cuda", dtype=torch.float32)
    y = causal_conv1d_fn(x, w)
    torch.cuda.synchronize()
    return {"shape": list(y.shape)}

if plan["run_conv"] and have_torch:
    import torch
    if torch.cuda.is_available():
        attempt("run:causal-conv1d", conv_run)

class Capture(logging.Handler):
    def __init__(self):
        logging.Handler.__init__(self, logging.WARNING)
        self.messages = []
    def emit(self, record):
        self.messages.append(record.getMessage())

def transformers_step():
    capture = Capture()
    logging.getLogger("transformers").addHandler(capture)
    import importlib
    m = importlib.import_module("transformers.models.qwen3_5.modeling_qwen3_5")
    flag = getattr(m, "is_fast_path_available", None)
    warned = [x for x in capture.messages if "falling back" in x or "fast path" in x]
    return {"is_fast_path_available": flag if isinstance(flag, bool) else None,
            "warnings": [w[:500] for w in warned[:8]]}

if plan["transformers"]:
    attempt("transformers", transformers_step)

def kernel_choice(f):
    """transformers' kernel wrapper (use_kernel_func_from_hub_with_fallback) keeps, in its closure,
    the kernel's name and whether it found the package's: (name, True/False), or None."""
    for _ in range(8):
        code, cells = getattr(f, "__code__", None), getattr(f, "__closure__", None)
        if code is not None and cells and {"func_name", "is_new_implementation"} <= set(code.co_freevars):
            value = dict(zip(code.co_freevars, cells))
            try:
                return value["func_name"].cell_contents, bool(value["is_new_implementation"].cell_contents)
            except ValueError:  # an empty cell: not the wrapper this reads
                return None
        f = getattr(f, "__wrapped__", None)
        if f is None:
            return None
    return None

def mamba2_step():
    import importlib
    m = importlib.import_module("transformers.models.mamba2.modeling_mamba2")
    flag = getattr(m, "is_fast_path_available", None)
    kernels = {}
    for value in list(vars(m).values()):
        choice = kernel_choice(value) if callable(value) else None
        if choice and choice[0] in plan["mamba2_kernels"]:
            kernels[choice[0]] = "package" if choice[1] else "torch"
    return {"is_fast_path_available": flag if isinstance(flag, bool) else None, "kernels": kernels}

if plan["transformers"]:
    attempt("transformers:mamba2", mamba2_step)
'''


def probe(plan, timeout):
    """Runs PROBE in a child of this interpreter; returns {step: result} (a crash or a timeout
    is the result of the step it was in)."""
    results, current = {}, None
    try:
        proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(plan)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout, stdin=subprocess.DEVNULL)
        out, err, rc, why = proc.stdout, proc.stderr, proc.returncode, None
    except subprocess.TimeoutExpired as e:
        out, err, rc, why = e.stdout or b"", e.stderr or b"", None, "timed out after %d s" % timeout
    except OSError as e:
        return {"*": {"ok": False, "error": "cannot run %s: %s" % (sys.executable, e)}}
    for line in out[:MAX_PROBE_OUTPUT].decode("utf-8", "replace").splitlines():
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):  # an imported module may print anything
            continue
        if not isinstance(event, dict) or "step" not in event:
            continue
        current = event["step"] if event.get("state") == "start" else None
        if event.get("state") == "done":
            results[event["step"]] = {k: v for k, v in event.items() if k not in ("step", "state")}
    if current is not None:
        if why is None:
            why = "the interpreter died (%s)" % ("signal %d" % -rc if rc is not None and rc < 0 else "exit %s" % rc)
        tail = err[-2000:].decode("utf-8", "replace").strip().splitlines()
        results[current] = {"ok": False, "error": why + (": " + tail[-1] if tail else "")}
    return results


# --- the report --------------------------------------------------------------------------------


def package_entry(dists, name):
    dist = dists.get(name)
    if not dist:
        return {"installed": False}
    return {"installed": True, "version": dist["version"], "dist_info": dist["dist_info"],
            "site": dist["site"], "kiln": dist["kiln"]}


def gather(args):
    report = {"doctor_version": DOCTOR_VERSION, "python": interpreter(), "glibc": glibc_version()}
    dists = distributions()
    packages = {name: package_entry(dists, name) for name in WATCHED}
    torch = packages["torch"]
    if torch["installed"]:
        torch["version_py"], torch["cuda"] = torch_files(dists["torch"])
    kiln_wheels = []
    for key in sorted(dists):
        dist = dists[key]
        if dist["kiln"]:
            entry = {"name": dist["name"], "version": dist["version"], "dist_info": dist["dist_info"],
                     "site": dist["site"], "provenance": kiln_provenance(dist)}
            entry["modules"] = top_level_modules(read_text(os.path.join(dist["dist_info"], "RECORD")) or "")
            kiln_wheels.append(entry)
    report["packages"] = packages
    report["kiln_wheels"] = kiln_wheels
    report["driver"], report["gpus"] = driver(args.libcuda or os.environ.get("KILN_LIBCUDA"))

    imports = [(name, mods) for name, mods in IMPORTS.items() if packages[name]["installed"]]
    conv = packages[CAUSAL_CONV1D]
    if any(packages[n]["installed"] for n in FLA_NAMES):
        imports.append(("fla", ["fla.ops.gated_delta_rule"]))
    for w in kiln_wheels:
        if normalize(w["name"]) not in IMPORTS and w["modules"]:
            imports.append((w["name"], w["modules"]))
    plan = {"torch": torch["installed"], "imports": imports,
            "run_conv": conv["installed"] and report["driver"]["available"],
            "transformers": packages["transformers"]["installed"], "mamba2_kernels": MAMBA2_KERNELS}
    results = probe(plan, args.timeout) if (plan["torch"] or imports or plan["transformers"]) else {}
    apply_probe(report, results)
    return report


def apply_probe(report, results):
    packages = report["packages"]
    if "torch" in results:
        packages["torch"]["import"] = results["torch"]
    for name in IMPORTS:
        if packages[name]["installed"]:
            packages[name]["import"] = results.get("import:" + name, {"ok": None})
    if packages[CAUSAL_CONV1D]["installed"] and "run:causal-conv1d" in results:
        packages[CAUSAL_CONV1D]["run"] = results["run:causal-conv1d"]
    for n in FLA_NAMES:
        if packages[n]["installed"]:
            packages[n]["import"] = results.get("import:fla", {"ok": None})
    for w in report["kiln_wheels"]:
        key = normalize(w["name"]) if normalize(w["name"]) in IMPORTS else w["name"]
        w["import"] = results.get("import:" + key, {"ok": None, "error": "no modules to import"})
        built = w["provenance"].get("torch")
        have = packages["torch"].get("version_py")
        w["torch_match"] = None if not built or not have else built == have
    if "transformers" in results:
        packages["transformers"]["qwen3_5"] = results["transformers"]
    if "transformers:mamba2" in results:
        packages["transformers"]["mamba2"] = results["transformers:mamba2"]
    if "*" in results:
        report["probe_error"] = results["*"]["error"]


def triton_note(report):
    triton = report["packages"]["triton"]
    if not triton["installed"]:
        return None
    hopper = any(g["cc"].startswith("9.") for g in report["gpus"])
    if hopper and version_tuple(triton["version"]) < FLA_HOPPER_TRITON:
        return ("fla's gated chunk backward refuses Hopper with Triton < 3.7.1 (training only; "
                "torch >= 2.13 brings a newer Triton)")
    return None


def fast_path(report, install_line):
    """Whether transformers' Gated DeltaNet layers will run the kernels, and if not, why."""
    p, reasons = report["packages"], []
    conv = p[CAUSAL_CONV1D]
    fla = [p[n] for n in FLA_NAMES if p[n]["installed"]]
    missing = ([] if conv["installed"] else ["causal_conv1d"]) + ([] if fla else ["fla"])
    if missing:
        reasons.append("%s not installed: %s" % (" and ".join(missing), install_line))
    if conv.get("import") and conv["import"].get("ok") is False:
        reasons.append("causal_conv1d does not import: %s" % conv["import"].get("error"))
    elif conv.get("run") and not conv["run"].get("ok"):
        reasons.append("causal_conv1d does not run on this GPU: %s" % conv["run"].get("error"))
    if fla and fla[0].get("import") and fla[0]["import"].get("ok") is False:
        reasons.append("fla does not import: %s" % fla[0]["import"].get("error"))
    reasons += torch_reasons(p)
    tr = p["transformers"]
    if not tr["installed"]:
        reasons.append("transformers not installed")
    elif "qwen3_5" in tr and not tr["qwen3_5"].get("ok"):
        reasons.append("transformers %s has no Qwen3.5 model: %s" % (tr["version"], tr["qwen3_5"].get("error")))
    reasons += driver_reasons(report)
    q = tr.get("qwen3_5") or {}
    if q.get("ok"):
        if q.get("is_fast_path_available") is False:
            reasons.append("transformers says is_fast_path_available = False")
        for w in q.get("warnings") or []:
            reasons.append("transformers warns: " + w)
    return {"active": not reasons, "reasons": reasons}


def torch_reasons(p):
    if not p["torch"]["installed"]:
        return ["torch not installed"]
    if p["torch"].get("import") and not p["torch"]["import"].get("ok"):
        return ["torch does not import: %s" % p["torch"]["import"].get("error")]
    return []


def driver_reasons(report):
    d, torch = report["driver"], report["packages"]["torch"]
    if not d["available"]:
        return ["no usable NVIDIA driver or GPU: %s" % d["error"]]
    tcuda = torch.get("cuda")
    if tcuda and d["cuda"] and version_tuple(tcuda)[:1] > version_tuple(d["cuda"])[:1]:
        return ["torch is built with CUDA %s but the driver supports CUDA %s at most: update the driver"
                % (tcuda, d["cuda"])]
    if torch.get("import", {}).get("ok") and not torch["import"].get("cuda_available"):
        return ["torch.cuda.is_available() is False"]
    return []


def mamba2_fast_path(report, install_line):
    """Whether transformers' Mamba-2 layers will run the kernels (which ones it takes from the
    packages), and if not, why."""
    p, reasons = report["packages"], []
    conv, mamba = p[CAUSAL_CONV1D], p[MAMBA_SSM]
    missing = [m for m, d in (("causal_conv1d", conv), ("mamba_ssm", mamba)) if not d["installed"]]
    if missing:
        reasons.append("%s not installed: %s" % (" and ".join(missing), install_line))
    for module, d in (("causal_conv1d", conv), ("mamba_ssm", mamba)):
        if d.get("import") and d["import"].get("ok") is False:
            reasons.append("%s does not import: %s" % (module, d["import"].get("error")))
    if conv.get("run") and not conv["run"].get("ok"):
        reasons.append("causal_conv1d does not run on this GPU: %s" % conv["run"].get("error"))
    reasons += torch_reasons(p)
    tr, kernels = p["transformers"], {}
    m = tr.get("mamba2") or {}
    if not tr["installed"]:
        reasons.append("transformers not installed")
    elif "mamba2" in tr and not m.get("ok"):
        reasons.append("transformers %s has no Mamba-2 model: %s" % (tr["version"], m.get("error")))
    reasons += driver_reasons(report)
    if m.get("ok"):
        kernels = m.get("kernels") or {}
        torch_path = [k for k in MAMBA2_KERNELS if kernels.get(k) == "torch"]
        if torch_path and not missing:
            reasons.append("transformers falls back to torch for " + ", ".join(torch_path))
        if m.get("is_fast_path_available") is False and not missing:
            reasons.append("transformers says is_fast_path_available = False")
    return {"active": not reasons, "reasons": reasons, "kernels": kernels}


def archs_of(gpus):
    ccs = sorted({g["cc"] for g in gpus}, key=version_tuple)
    return ";".join(ccs)


# --- the server's targets (--server) ----------------------------------------------------------


def printable(text, limit=300):
    """A stranger's text as one line of printable ASCII (other characters escaped: \\x1b), cut."""
    out = []
    for c in str(text)[:limit]:
        out.append(c if " " <= c <= "~" else c.encode("unicode_escape").decode("ascii"))
    return "".join(out) + ("..." if len(str(text)) > limit else "")


def server_url(server):
    """(the URL of the server's "/" without user info, its Authorization header or None), or None
    when `server` is no http(s) URL to ask (the placeholder <buildhost>, a typo)."""
    if not server or "<" in server or ">" in server:
        return None
    try:
        parts = urllib.parse.urlsplit(server)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not host or any(c.isspace() for c in server):
        return None
    auth = None
    if parts.username is not None or parts.password is not None:
        user = urllib.parse.unquote(parts.username or "")
        password = urllib.parse.unquote(parts.password or "")
        auth = "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
    netloc = ("[%s]" % host if ":" in host else host) + (":%d" % port if port else "")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/") + "/", "", "")), auth


def read_served_targets(url, auth):
    """The server's JSON list of targets (raises on any failure)."""
    headers = {"Accept": JSON_TYPE, "User-Agent": "kiln-doctor/%d" % DOCTOR_VERSION}
    if auth:
        headers["Authorization"] = auth
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=SERVER_DEADLINE) as r:
        ctype = (r.headers.get("Content-Type") or "").split(";")[0].strip()
        if ctype != JSON_TYPE:
            raise ValueError("it answered %s, not its targets as %s (a kiln serve older than this "
                             "doctor.py?)" % (printable(ctype or "no Content-Type", 80), JSON_TYPE))
        data = r.read(MAX_TARGETS_BYTES + 1)
    if len(data) > MAX_TARGETS_BYTES:
        raise ValueError("its list of targets is larger than %d bytes" % MAX_TARGETS_BYTES)
    try:
        doc = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        raise ValueError("its list of targets is not JSON")
    return parse_served_targets(doc)


def words(value, limit=MAX_SERVED_LIST):
    """The strings of a list that SERVED_WORD accepts (the rest left out)."""
    if not isinstance(value, list):
        return []
    return [w for w in value[:limit] if isinstance(w, str) and SERVED_WORD.match(w)]


def word(value):
    return value if isinstance(value, str) and SERVED_WORD.match(value) else None


def parse_served_targets(doc):
    """The targets of the server's JSON, each a dict of checked fields; targets whose name is not
    a target name are left out (counted in "left_out")."""
    if not isinstance(doc, dict) or not isinstance(doc.get("targets"), list):
        raise ValueError("its answer has no list of targets")
    targets, left_out = [], 0
    for t in doc["targets"][:MAX_SERVED_TARGETS]:
        if not isinstance(t, dict) or not isinstance(t.get("name"), str) or not TARGET_NAME.match(t["name"]):
            left_out += 1
            continue
        projects = {}
        raw = t.get("projects") if isinstance(t.get("projects"), list) else []
        for p in raw[:MAX_SERVED_PROJECTS]:
            if isinstance(p, dict) and word(p.get("name")):
                archs = words(p["archs"]) if isinstance(p.get("archs"), list) else None
                projects[normalize(p["name"])] = {"abi": set(words(p.get("abi"))), "archs": archs}
        targets.append({"name": t["name"], "torch": word(t.get("torch")), "cuda": word(t.get("cuda")),
                        "python": set(words(t.get("python"))), "archs": words(t.get("archs")),
                        "declared": t.get("declared") is True, "projects": projects})
    return {"targets": targets, "left_out": left_out + max(0, len(doc["targets"]) - MAX_SERVED_TARGETS)}


def served_targets(server):
    """({"targets": [...], "left_out": N}, None), or (None, why), or (None, None) when `server`
    names nothing to ask. Never raises: the server is a stranger; the whole exchange has
    SERVER_DEADLINE seconds (a thread, so that name resolution is bounded too)."""
    where = server_url(server)
    if where is None:
        return None, None
    result = {}

    def ask():
        try:
            result["value"] = read_served_targets(*where)
        except Exception as e:  # anything the network, the server or its bytes raise
            result["error"] = str(e) or type(e).__name__

    thread = threading.Thread(target=ask, name="kiln-doctor-server", daemon=True)
    thread.start()
    thread.join(SERVER_DEADLINE + 1)
    if "value" in result:
        return result["value"], None
    return None, printable(result.get("error") or "no answer within %d s" % SERVER_DEADLINE, 200)


def sass_runs(token, cc):
    """Whether SASS of an arch token ("sm_90", "sm_90a", "sm_120+ptx") runs on a GPU of compute
    capability `cc` (major, minor), as kiln's gpu-target check judges it: the same major and a
    minor <= the GPU's, exactly the GPU's for an a/f variant. PTX alone ("compute_120") does not
    count: it runs only by JIT compilation at load, which a driver older than its ISA refuses."""
    m = re.match(r"sm_(\d{2,4})([af]?)(\+ptx)?\Z", token)
    if not m:
        return False
    number = int(m.group(1))
    major, minor = number // 10, number % 10
    if m.group(2):
        return (major, minor) == cc
    return major == cc[0] and minor <= cc[1]


def host_facts(report):
    """What a served target must match: (facts, None), or (None, why no target can be chosen)."""
    torch = report["packages"]["torch"]
    if not torch.get("installed"):
        return None, "torch is not installed here"
    version = torch.get("version_py") or torch.get("version") or ""
    if not torch.get("cuda"):
        return None, "this torch (%s) is not built with CUDA" % printable(version, 60)
    if not report["gpus"]:
        return None, "no GPU seen here, so no arch to match"
    ccs = sorted({tuple(version_tuple(g["cc"])[:2]) for g in report["gpus"]})
    return {"torch": version_tuple(version), "torch_text": version.split("+", 1)[0],
            "cuda": version_tuple(torch["cuda"])[:2], "abi": report["python"]["abi_tag"],
            "ccs": [c for c in ccs if len(c) == 2]}, None


def torch_problem(t, host):
    """Why target `t`'s torch and CUDA are not the host's ("" when they are). A full version must
    equal the host's (its public part); a major.minor (all a cache-only target's local label
    says) must equal the host's major.minor, as its wheels' Requires-Dist (torch==X.Y.*) asks."""
    if not t["torch"] or not t["cuda"]:
        return "its torch and CUDA are not known"
    want = version_tuple(t["torch"])
    have = host["torch"][:len(want)] if len(want) < 3 else host["torch"]
    if not want or have != want:
        return "torch %s, not %s" % (t["torch"], host["torch_text"])
    if version_tuple(t["cuda"])[:2] != host["cuda"]:
        return "CUDA %s, not %s" % (t["cuda"], ".".join(str(x) for x in host["cuda"]))
    return ""


def archs_problem(archs, host):
    missing = ["sm_%d%d" % cc for cc in host["ccs"] if not any(sass_runs(a, cc) for a in archs)]
    return "no SASS for %s" % ", ".join(missing) if missing else ""


def holds(t, package, host):
    """Whether target `t` serves `package` (and what the same index must have with it) for this
    host: a wheel of the host's ABI tag (or a pure one) whose archs cover the host's GPUs."""
    for name in (package,) + SERVED_WITH.get(package, ()):
        p = t["projects"].get(name)
        if not p or not (host["abi"] in p["abi"] or "none" in p["abi"]):
            return False
        if p["archs"] is not None and archs_problem(p["archs"], host):
            return False
    return True


def choose_target(served, host, packages):
    """The served target to install `packages` from: {"kind": "served"} (it holds them all),
    {"kind": "build"} (it fits this host and `kiln build --target NAME` adds what it lacks), or
    {"kind": None, "why": [...]}."""
    full, buildable, why = [], [], []
    for t in served["targets"]:
        problem = torch_problem(t, host)
        held = [p for p in packages if holds(t, p, host)]
        exact = len(version_tuple(t["torch"])) >= 3
        if not problem and len(held) == len(packages):
            full.append((not exact, t["name"], t))
            continue
        if not problem and host["abi"] not in t["python"]:
            problem = "no torch for %s" % host["abi"]
        if not problem:
            problem = archs_problem(t["archs"], host)
        if not problem and t["declared"]:
            buildable.append((-len(held), not exact, t["name"], t))
            continue
        lacks = [p for p in packages if p not in held]
        # Near misses (this torch, something else) first, then the targets of another torch.
        why.append((bool(torch_problem(t, host)), "%s: %s" % (
            t["name"], problem or "lacks %s and is not declared there, so it cannot be built"
            % " and ".join(lacks))))
    if full:
        return {"kind": "served", "target": min(full)[-1]}
    if buildable:
        return {"kind": "build", "target": min(buildable)[-1]}
    return {"kind": None, "why": [text for _, text in sorted(why, key=lambda w: w[0])]}


def host_target(report):
    """The target this host needs (name, torch version, local label, ABI tag, archs)."""
    torch = report["packages"]["torch"]
    version = torch.get("version_py") or torch.get("version") or "<torch version>"
    cuda = torch.get("cuda") or ""
    if "+" not in version and cuda:
        version += "+cu" + cuda.replace(".", "")
    label = version.split("+", 1)[1] if "+" in version else "cu<XYZ>"
    tag = report["python"]["abi_tag"]
    archs = archs_of(report["gpus"]) or "<the GPUs' compute capabilities, e.g. 9.0>"
    mm = ".".join(str(x) for x in version_tuple(version)[:2]) or "X.Y"
    sms = "-".join("sm" + a.replace(".", "") for a in archs.split(";")) if report["gpus"] else "smXY"
    name = "%s-torch%s-%s-%s" % (label, mm, tag, sms)
    return name, version, label, tag, archs


def next_commands(report, server, served=None, served_error=None):
    """The commands from this environment to a fast path. With a server that lists its targets
    (`served`, from served_targets), a target of it that fits this host: its index in the install
    commands, and `kiln build --target` first where it lacks a package; else a target for this
    host's torch, Python and GPUs: `kiln target init`, the build, kiln serve, pip's and uv's
    install. `commands_for` has them for each set of missing paths (its key: the paths' names
    joined by "+"), since kiln's static checks may add to what doctor.py finds missing, with a
    line of why in `notes_for`; `commands` and `note` are those for the Gated DeltaNet path."""
    name, version, label, tag, archs = host_target(report)
    base = server.rstrip("/")
    host, host_why = host_facts(report)

    def own_target(packages):
        pip, uv = install_commands("%s/%s/simple/" % (base, name), packages)
        return [
            ["kiln", "target", "init", "--name", name, "--torch", version, "--index-url",
             "https://download.pytorch.org/whl/" + label, "--python-tags", tag, "--archs", archs,
             "--toolkit", "system"],
            ["kiln", "build", "--target", name] + packages,
            ["kiln", "serve", "--host", "0.0.0.0"],
            pip,
            uv,
        ]

    def plan(packages):
        """(argv lists, note, the served target's name or None)."""
        if served is None:
            note = ("cannot read the targets %s serves: %s" % (printable(server, 200), served_error)
                    if served_error else "")
            return own_target(packages), note, None
        if host is None:
            return own_target(packages), "no target of %s chosen: %s" % (printable(server, 200), host_why), None
        choice = choose_target(served, host, packages)
        t = choice.get("target")
        if t is None:
            why = choice["why"]
            shown = "; ".join(why[:4]) + ("; ..." if len(why) > 4 else "")
            note = "no target %s serves fits this host (torch %s, CUDA %s, %s, %s)%s" % (
                printable(server, 200), printable(host["torch_text"], 60),
                ".".join(str(x) for x in host["cuda"]), host["abi"],
                ", ".join("sm_%d%d" % cc for cc in host["ccs"]), ": " + shown if shown else ": it serves none")
            return own_target(packages), note, None
        index = "%s/%s/simple/" % (base, urllib.parse.quote(t["name"], safe=""))
        pip, uv = install_commands(index, packages)
        if choice["kind"] == "served":
            note = "target %s of %s fits this host and holds %s" % (
                t["name"], printable(server, 200), " and ".join(packages))
            return [pip, uv], note, t["name"]
        lacks = [p for p in packages if not holds(t, p, host)]
        note = ("target %s of %s fits this host but lacks %s: build on the build host, then "
                "install" % (t["name"], printable(server, 200), " and ".join(lacks)))
        return [["kiln", "build", "--target", t["name"]] + packages, pip, uv], note, t["name"]

    argv_for, notes_for, targets_for = {}, {}, {}
    for n in range(1, len(PATH_PACKAGES) + 1):
        for paths in itertools.combinations(PATH_PACKAGES, n):
            packages = [p for path in paths for p in PATH_PACKAGES[path]]
            key = "+".join(paths)
            argv_for[key], notes_for[key], targets_for[key] = plan(list(dict.fromkeys(packages)))
    # The lines a person pastes: every word quoted (a torch version or a --server value may hold
    # anything); `argv_for` keeps the words themselves, which kiln quotes again on its side.
    commands_for = {k: [shell_line(argv) for argv in v] for k, v in argv_for.items()}
    pip, uv = commands_for["fast_path"][-2:]
    mamba_pip, mamba_uv = commands_for["mamba2_fast_path"][-2:]
    return {
        "target": targets_for["fast_path"] or name,
        "served_target_for": targets_for,
        "commands": commands_for["fast_path"],
        "commands_for": commands_for,
        "argv_for": argv_for,
        "note": notes_for["fast_path"],
        "notes_for": notes_for,
        "install": pip,
        "install_uv": uv,
        "install_mamba2": mamba_pip,
        "install_mamba2_uv": mamba_uv,
    }


def missing_paths(report):
    """The names of the fast paths that are not active, in report order, joined by "+"."""
    return "+".join(p for p in PATH_PACKAGES if not report[p]["active"])


def install_commands(index, packages):
    """pip's and uv's command (argv lists) for `packages` from kiln's index alone (kiln sends what
    is not its own upstream); pip skips a plain-http index on another host unless it is a trusted
    host."""
    trusted = []
    try:
        parts = urllib.parse.urlsplit(index)
        host = parts.hostname or ""
    except ValueError:  # a --server value that is no URL: the command names it as given
        parts, host = None, ""
    loopback = host == "localhost" or host.startswith("127.") or host == "::1"
    if parts and parts.scheme == "http" and host and not loopback:
        trusted = ["--trusted-host", parts.netloc.rsplit("@", 1)[-1]]
    return (["pip", "install", "--index-url", index] + trusted + list(packages),
            ["uv", "pip", "install", "--index-url", index] + list(packages))


def shell_line(argv):
    """The line that runs exactly `argv` in sh, dash, bash or zsh: each word as shlex.quote gives
    it (a word it leaves bare that starts with '=' is quoted too: zsh expands =cmd)."""
    def quote(word):
        q = shlex.quote(word)
        return "'%s'" % word if q == word and word.startswith("=") else q
    return " ".join(quote(w) for w in argv)


def describe(entry, label=None):
    if not entry["installed"]:
        return "not installed"
    text = entry["version"] + (" (kiln)" if entry.get("kiln") else "")
    imp = entry.get("import")
    if imp and imp.get("ok") is False:
        text += ", does not import: %s" % imp.get("error")
    elif imp and imp.get("ok"):
        text += ", imports"
    return text


def summary(report):
    p, d, rows = report["packages"], report["driver"], []
    py = report["python"]
    rows.append(["python", "%s %s (%s), glibc %s" % (py["executable"], py["version"], py["abi_tag"],
                                                     report["glibc"] or "unknown")])
    t = dict(p["torch"])
    if t.get("version_py"):
        t["version"] = t["version_py"]
    rows.append(["torch", describe(t) + (", CUDA %s" % t["cuda"] if t.get("cuda") else "")])
    note = triton_note(report)
    rows.append(["triton", describe(p["triton"]) + ("; " + note if note else "")])
    rows.append(["transformers", describe(p["transformers"])])
    if d["available"] or d["cuda"]:
        rows.append(["driver", "%s, CUDA %s (%s)" % (d["release"] or "release unknown", d["cuda"] or "?",
                                                       d["libcuda"])])
    if not d["available"]:
        rows.append(["gpu", "none: %s" % d["error"]])
    for g in report["gpus"]:
        rows.append(["gpu %d" % g["index"], "%s, %s (compute capability %s)" % (g["name"], g["sm"], g["cc"])])
    rows.append([CAUSAL_CONV1D, describe(p[CAUSAL_CONV1D])])
    fla = [n for n in FLA_NAMES if p[n]["installed"]]
    rows.append(["fla", "%s %s" % (fla[0], describe(p[fla[0]])) if fla else "not installed"])
    rows.append([MAMBA_SSM, describe(p[MAMBA_SSM])])
    for w in report["kiln_wheels"]:
        text = "%s %s" % (w["name"], w["version"])
        imp = w["import"]
        text += ", imports" if imp.get("ok") else ", does not import: %s" % imp.get("error")
        built = w["provenance"].get("torch")
        if w["torch_match"] is False:
            text += ", built for torch %s (not this torch %s)" % (built, p["torch"].get("version_py"))
        elif w["torch_match"]:
            text += ", built for this torch"
        rows.append(["kiln wheel", text])
    return rows


def build_report(args):
    report = gather(args)
    served, served_error = served_targets(args.server)
    nxt = next_commands(report, args.server, served, served_error)
    report["fast_path"] = fast_path(report, nxt["install"])
    report["mamba2_fast_path"] = mamba2_fast_path(report, nxt["install_mamba2"])
    report["next"] = nxt
    report["summary"] = summary(report)
    report["ok"] = report["fast_path"]["active"]
    return report


def path_line(label, path):
    if path["active"]:
        return "%s: active" % label
    return "%s: missing (%s)" % (label, "; ".join(path["reasons"]))


def render(report):
    rows = report["summary"]
    width = max(len(r[0]) for r in rows)
    lines = ["%s  %s" % (r[0].ljust(width), r[1]) for r in rows]
    fp = report["fast_path"]
    lines.append(path_line("fast path", fp))
    lines.append(path_line("Mamba-2 fast path", report["mamba2_fast_path"]))
    missing = missing_paths(report)
    if missing:
        lines.append("next:")
        note = report["next"]["notes_for"][missing]
        if note:
            lines.append("  # " + printable(note, 2000))
        lines.extend("  " + c for c in report["next"]["commands_for"][missing])
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="doctor.py", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--libcuda", help="the driver library to load (default: libcuda.so.1; "
                        "also KILN_LIBCUDA): a test and diagnostic hook")
    parser.add_argument("--server", default=os.environ.get("KILN_SERVER", "http://<buildhost>:8000"),
                        help="kiln serve's URL (also KILN_SERVER): a target it serves that fits this host "
                        "names the index of the install command")
    parser.add_argument("--timeout", type=int, default=300, help="seconds for the import checks")
    args = parser.parse_args(argv)
    report = build_report(args)
    if args.json:
        sys.stdout.write(json.dumps(report, indent=1, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
