"""The differential test's inputs: the corpus (real METADATA files) and, from a fixed seed,
mutations of its documents, versions, specifiers, markers, requirements and wheel file names,
generated wheel file names and batches of generated versions to sort.
generate(corpus) -> [(kind, input)]."""

import random
import re

SEED = 33
OPS = ["==", "!=", ">=", "<=", "<", ">", "~=", "==="]
VARIABLES = ["python_version", "python_full_version", "os_name", "os.name", "sys_platform",
             "sys.platform", "platform_release", "platform_system", "platform_version",
             "platform.version", "platform_machine", "platform_python_implementation",
             "python_implementation", "implementation_name", "implementation_version", "extra",
             "extras", "dependency_groups", "python_versio", "platform_tag", "os", "Extra"]
MARKER_OPS = ["==", "!=", "<", "<=", ">", ">=", "~=", "===", "in", "not in", "=", "<>", "not",
              "is", "=~"]


def random_version(rnd):
    """A version as a release, an sdist or a file name might spell it: epochs, long and zero-padded
    releases, pre/post/dev parts in any spelling, local labels of words and numbers."""
    num = lambda: rnd.choice(["0", "1", "2", "9", "10", "11", "007", str(rnd.randrange(100)),
                              "12345678901234567890"])
    out = rnd.choice(["", "", "", "v", "V"])
    if rnd.random() < 0.1:
        out += num() + "!"
    out += ".".join(num() for _ in range(rnd.choice([1, 2, 2, 3, 3, 4, 6])))
    if rnd.random() < 0.3:
        out += rnd.choice(["", ".", "-", "_"]) + rnd.choice(["a", "b", "rc", "c", "alpha", "beta",
                                                             "pre", "preview", "RC"])
        out += rnd.choice(["", ".", "-"]) + rnd.choice(["", num()])
    if rnd.random() < 0.25:
        out += rnd.choice(["-" + num(), ".post" + num(), "post", "-r" + num(), ".rev", "_post-"])
    if rnd.random() < 0.25:
        out += rnd.choice([".dev", ".dev" + num(), "-dev" + num(), "dev"])
    if rnd.random() < 0.3:
        segs = [rnd.choice(["cu130", "torch2", "9", "11", "01", "abc", "ABC", "a", "0", "ubuntu",
                            num()]) for _ in range(rnd.choice([1, 1, 2, 3]))]
        out += "+" + "".join(seg + rnd.choice([".", "-", "_"]) for seg in segs[:-1]) + segs[-1]
    return out


def random_wheel_filename(rnd):
    name = rnd.choice(["demo", "Demo.Pkg", "demo_pkg", "demo__pkg", "_demo", "demo.", "d", "de-mo",
                       "dé", "demo+x", "Demo_Pkg.x", "9lives", ""])
    version = random_version(rnd) if rnd.random() < 0.8 else rnd.choice(
        ["1.0.x", "x", "", "1 0", "1.0+", "1!", "1.0-1"])
    parts = [name, version]
    if rnd.random() < 0.3:
        parts.append(rnd.choice(["1", "01x", "1_local", "x1", "", "12345678901234567890a"]))
    tag = lambda choices: ".".join(rnd.choice(choices) for _ in range(rnd.choice([1, 1, 1, 2, 3])))
    parts.append(tag(["py3", "cp311", "cp312", "py2", "3py", "c+p", "", "pÿ3", "_x", "cp313t"]))
    parts.append(tag(["none", "abi3", "cp311", "", "cp313t"]))
    parts.append(tag(["any", "manylinux_2_28_x86_64", "linux_x86_64", "manylinux2014_x86_64", ""]))
    if rnd.random() < 0.05:
        parts.append("extra")
    return "-".join(parts) + rnd.choice([".whl"] * 19 + [".zip"])


def version_parts(rnd):
    """A version's parts: epoch, release, pre-release (letter, number), post, dev, local label."""
    n = lambda: rnd.choice([0, 1, 2, 9, 10, 11, 12345678901234567890, rnd.randrange(100)])
    return {"epoch": n() if rnd.random() < 0.1 else 0,
            "release": [n() for _ in range(rnd.choice([1, 2, 2, 3, 3, 4]))],
            "pre": (rnd.choice("abc"), n()) if rnd.random() < 0.3 else None,
            "post": n() if rnd.random() < 0.25 else None,
            "dev": n() if rnd.random() < 0.25 else None,
            "local": [rnd.choice(["cu130", "torch2", "ubuntu", "abc", str(n())])
                      for _ in range(rnd.choice([1, 2, 3]))] if rnd.random() < 0.4 else []}


def spell(parts, rnd):
    """One of the many texts PEP 440 reads as these parts: any case, leading zeros, a 'v', every
    pre/post/dev spelling and separator, trailing zero releases, any local separator."""
    num = lambda x: rnd.choice(["", "", "0", "00"]) + str(x)
    sep = lambda: rnd.choice(["", ".", "-", "_"])
    case = lambda t: "".join(c.upper() if rnd.random() < 0.3 else c for c in t)
    out = rnd.choice(["", "", "v", "V"])
    if parts["epoch"] or rnd.random() < 0.1:
        out += num(parts["epoch"]) + "!"
    out += ".".join(num(x) for x in parts["release"] + [0] * rnd.choice([0, 0, 1, 2]))
    if parts["pre"]:
        letter, x = parts["pre"]
        word = rnd.choice({"a": ["a", "alpha"], "b": ["b", "beta"],
                           "c": ["rc", "c", "pre", "preview"]}[letter])
        out += sep() + case(word) + ((sep() + num(x)) if x or rnd.random() < 0.5 else "")
    if parts["post"] is not None:
        x = parts["post"]
        out += rnd.choice(["-" + num(x), sep() + case(rnd.choice(["post", "rev", "r"])) + sep() +
                           num(x)] + ([sep() + "post"] if x == 0 else []))
    if parts["dev"] is not None:
        x = parts["dev"]
        out += sep() + case("dev") + (sep() + num(x) if x or rnd.random() < 0.5 else "")
    if parts["local"]:
        segs = [case(p) if not p.isdigit() else num(p) for p in parts["local"]]
        out += "+" + "".join(seg + rnd.choice(".-_") for seg in segs[:-1]) + segs[-1]
    return out


def version_pairs(rnd, count=3000):
    """(METADATA Version, wheel file name) pairs: two spellings of one version (a file name writes
    '-' as '_'), or of two versions one part apart."""
    out = []
    for i in range(count):
        parts = version_parts(rnd)
        other = dict(parts)
        if i % 3 == 2:
            key = rnd.choice(["epoch", "release", "pre", "post", "dev", "local"])
            other[key] = {"epoch": parts["epoch"] + 1, "release": parts["release"] + [1],
                          "pre": None if parts["pre"] else ("a", 0),
                          "post": None if parts["post"] is not None else 0,
                          "dev": None if parts["dev"] is not None else 0,
                          "local": parts["local"][:-1] if parts["local"] else ["x"]}[key]
        file_version = spell(other, rnd).replace("-", "_")
        out.append(spell(parts, rnd) + "\n" + f"demo-{file_version}-py3-none-any.whl")
    return out


def version_mutations(v, rnd):
    out = ["v" + v, "V" + v, v + "-1", v + ".post", v + "post1", v + "-post1", v + "_rc1", v + "b",
           v + "alpha2", v + "+local", v + "+Local.1", v + ".*", v + "c", v + "rev3", v + "r",
           v.upper(), " " + v + " ", v + ".", v + "-", v + "..", "1!" + v, v + ".dev", v + "dev-1",
           v + "a.", v + "+", v + "+a..b", v + "pre", v + "preview1", v + ".RC1", v + "-dev",
           v + "a1.post2.dev3", v + "+a-b_c", v + "0", "0" + v, v + "\t", v + "a-", v + "-a1",
           v.replace(".", "_"), v + ".post-1", v + "+ubuntu", v + ".a1"]
    for _ in range(4):
        i = rnd.randrange(len(v) + 1)
        out.append(v[:i] + rnd.choice("._-+!*abcrv0123456789 ") + v[i:])
    return out


def marker_mutations(m, rnd):
    out = [m, "(" + m + ")", "((" + m + "))", m + " and os_name == 'nt'",
           "(" + m + ") or (extra == 'x')", m.replace("'", '"'), m.replace(" ", ""),
           m.replace("'", "", 1), m + ")", "(" + m, "not " + m, m + " or", m.replace("and", "AND")]
    for op in ("==", ">=", "<", "in", "!="):
        if op in m:
            out.append(m.replace(op, rnd.choice(MARKER_OPS), 1))
    return out


def marker_templates(rnd, n):
    out = ["this is not a marker", "", "extra", "python_version", "'a' == 'b'",
           "python_version >= '3.9' and (os_name == 'nt' or sys_platform != 'linux')",
           "'cuda' in extras", "dependency_groups == 'x'", "extra == 'a\\x41'", "extra == 'a\\'",
           "extra == 'a\\q'", "extra == 'a\tb'", "python_version>'3'and os_name=='nt'",
           "os_name not  in 'x'", "os_name notin 'x'", "(" * 205 + "os_name=='a'" + ")" * 205,
           "(" * 150 + "os_name=='a'" + ")" * 150]
    for _ in range(n):
        parts = []
        for _ in range(rnd.randint(1, 3)):
            left = rnd.choice(VARIABLES + ["'3.9'", '"x"'])
            right = rnd.choice(["'3.9'", '"linux"', "'x'", "'1.0.post1'", "'a'", '"', "'x",
                                "extra", "'cp311'", '""'])
            op = rnd.choice(MARKER_OPS)
            ws = rnd.choice(["", " ", "  ", "\t"])
            item = f"{left}{ws}{op}{ws}{right}" if op.isalpha() is False else f"{left} {op} {right}"
            if rnd.random() < 0.2:
                item = "(" + item + ")"
            parts.append(item)
        out.append(rnd.choice([" and ", " or ", "and", " or(", " & "]).join(parts))
    return out


def marker_values(rnd, n):
    """Markers that parse, whose values vary in a target's environment (Python 3.12.7 on Linux):
    versions on both sides, text comparisons, in/not in, escapes, extras."""
    values = {
        "python_version": ["3.12", "3.11", "3.13", "3", "3.12.0", "3.12.*", "3.*", "2.7", "abc",
                           "3.12rc1", "3.12+local", "v3.12", "3.1"],
        "python_full_version": ["3.12.7", "3.12", "3.12.7+", "3.12.*", "3.12.8.dev1", "3.12.7.0"],
        "implementation_version": ["3.12.7", "3.12"],
        "os_name": ["posix", "nt", "pos", "osix", "POSIX"],
        "sys_platform": ["linux", "linux2", "win32", "darwin", "lin"],
        "platform_system": ["Linux", "Windows", "linux", "inu"],
        "platform_machine": ["x86_64", "aarch64", "x86", "AMD64"],
        "implementation_name": ["cpython", "pypy"],
        "platform_python_implementation": ["CPython", "PyPy"],
        "extra": ["", "dev", "Dev_Test", "a.b", "x"],
        "platform_release": ["6.1"],
    }
    names = list(values) + ["os.name", "sys.platform", "platform.machine", "python_implementation",
                            "platform.python_implementation"]
    ops = ["==", "!=", "<", "<=", ">", ">=", "~=", "===", "in", "not in"]
    quote = lambda v: rnd.choice(["'%s'", '"%s"']) % v
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rnd.randint(1, 4)):
            name = rnd.choice(names)
            key = {"os.name": "os_name", "sys.platform": "sys_platform",
                   "platform.machine": "platform_machine",
                   "python_implementation": "platform_python_implementation",
                   "platform.python_implementation": "platform_python_implementation"}.get(name, name)
            value = rnd.choice(values[key])
            if rnd.random() < 0.05:
                value = value.replace("o", "\\x6f").replace("3", "\\u0033")
            op = rnd.choice(ops)
            item = (f"{quote(value)} {op} {name}" if rnd.random() < 0.3
                    else f"{name} {op} {quote(value)}")
            parts.append("(" + item + ")" if rnd.random() < 0.2 else item)
        text = parts[0]
        for p in parts[1:]:
            text += rnd.choice([" and ", " or "]) + p
        out.append(text if rnd.random() < 0.8 else "(" + text + ") or os_name == 'nt'")
    return out


def requirement_mutations(r, rnd, versions):
    out = [r, r.replace(" ", ""), r.replace(";", " ;"), r + " ", " " + r, r.replace("==", "==="),
           r.replace(">=", "~="), r.replace(">=", "=>"), r.replace(",", ", "), r.replace(",", ",,"),
           r + ",", r.replace("[", "[ ").replace("]", " ]")]
    m = re.match(r"([A-Za-z0-9._-]+)(\[[^\]]*\])?\s*([^;]*)(;.*)?$", r)
    if m:
        name, extras, spec, marker = m.group(1), m.group(2) or "", m.group(3), m.group(4) or ""
        for v in rnd.sample(versions, min(6, len(versions))):
            op = rnd.choice(OPS)
            out.append(f"{name}{extras}{op}{v}{marker}")
            out.append(f"{name}{extras} ({op}{v}){marker}")
        out += [f"{name}_", f"{name}-", f"{name}{extras} @ https://x.invalid/a.whl{marker}",
                f"{name} @ https://x.invalid/a.whl ; python_version > '3'",
                f"{name}@https://x.invalid/a.whl;python_version>'3'", f"{name}[]", f"{name}[a_,b]",
                f"{name}[a b]", f"{name} {spec}", f"{name}{extras}{spec}; this is not a marker",
                f"{name} ()", f"{name}(>=1)", f"{name}>=1,", f"{name}>=1, ,<2"]
        if marker:
            for mm in marker_mutations(marker[1:].strip(), rnd)[:6]:
                out.append(f"{name}{extras}{spec}; {mm}")
    return out


def filename_mutations(f, rnd):
    parts = f[:-4].split("-")
    out = [f, f.replace(parts[0], parts[0] + "__x", 1), f.replace(parts[1], "v" + parts[1], 1),
           f.replace(parts[1], parts[1] + "_post1", 1), "-".join(parts[:2] + ["1"] + parts[2:]) +
           ".whl", "-".join(parts[:2] + ["x1"] + parts[2:]) + ".whl", f[:-4] + ".zip",
           f.replace("py3", "3py"), f.replace("-py", "-.py"), f.replace(".whl", "-x.whl"),
           f.replace(parts[1], parts[1] + "+local", 1), f.replace(parts[0], parts[0].upper(), 1),
           f.replace(parts[0], parts[0] + ".x", 1), f.replace("none", "none."),
           f.replace(parts[1], parts[1] + ".", 1)]
    return out


def metadata_mutations(doc, rnd, requirements):
    head, sep, body = doc.partition("\n\n")
    lines = head.split("\n")
    out = [doc]
    for _ in range(30):
        ls = list(lines)
        what = rnd.randrange(9)
        i = rnd.randrange(1, len(ls)) if len(ls) > 1 else 0
        if what == 0:
            del ls[i]
        elif what == 1:
            ls.insert(i, ls[i])
        elif what == 2:
            rnd.shuffle(ls)
        elif what == 3:
            ls[0] = "Metadata-Version: " + rnd.choice(["1.0", "1.1", "1.2", "2.0", "2.1", "2.2",
                                                       "2.3", "2.4", "2.5", "2.6", "3.0"])
        elif what == 4:
            ls.insert(i, "Requires-Dist: " + rnd.choice(requirements))
        elif what == 5:
            ls.insert(i, rnd.choice(["X-Unknown: 1", "Description: inline", "Dynamic: version",
                                     "Dynamic: license", "Provides-Extra: a_", "Provides-Extra: -x",
                                     "Description-Content-Type: text/html",
                                     "Description-Content-Type: text/markdown; variant=foo",
                                     "Summary: two", "Requires-Python: >=3.9,", "Requires-Python: ",
                                     "Requires-Python: >=3.9.*", "Project-URL: Home",
                                     "License-Expression: MIT OR", "License-File: ../x",
                                     "Import-Name: a.b", "Import-Name: class", "Version: 1.0-1",
                                     "Name: a_", "Name: -a"]))
        elif what == 6:
            ls = [l for l in ls if not l.lower().startswith(("name:", "version:"))] or ls
        elif what == 7:
            ls = [re.sub(r"^(Version: )(.*)$", lambda m: m.group(1) + "v" + m.group(2), l)
                  for l in ls]
        else:
            ls = [l + (" ; python_version < '3'" if l.startswith("Requires-Dist:") and ";" not in l
                       else "") for l in ls]
        out.append("\n".join(ls) + sep + body)
    return out


def field_values(doc, name):
    return [l.split(":", 1)[1].strip() for l in doc.partition("\n\n")[0].splitlines()
            if l.lower().startswith(name.lower() + ":")]


def is_version(v):
    """Whether packaging's pattern matches `v` (a sort batch must hold versions only; the test
    checks that both sides took every batch)."""
    return VERSION.fullmatch(v) is not None


# packaging 26.4's VERSION_PATTERN, for picking the generated versions a sort can hold.
VERSION = re.compile(r"""\s*v?(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*(?:[-_.]?(?:alpha|a|beta|b|preview|pre|c|rc)
    [-_.]?[0-9]*)?(?:-[0-9]+|[-_.]?(?:post|rev|r)[-_.]?[0-9]*)?(?:[-_.]?dev[-_.]?[0-9]*)?
    (?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?\s*""", re.VERBOSE | re.IGNORECASE)


def sort_batches(rnd, corpus_versions, batches=5, size=2500):
    """Newline-joined versions for the sort kind: generated ones and the corpus's, shuffled."""
    pool = [v for v in corpus_versions if is_version(v) and "\n" not in v]
    out = []
    for _ in range(batches):
        batch = [v for v in (random_version(rnd) for _ in range(size)) if is_version(v)]
        batch += rnd.sample(pool, min(len(pool), size // 5))
        rnd.shuffle(batch)
        out.append(batch)
    return out


def generate(corpus):
    """[(kind, input)] from {wheel file name: METADATA text}."""
    rnd = random.Random(SEED)
    items = []
    docs = [t.replace("\r\n", "\n") for t in corpus.values()]
    versions = sorted({v for d in docs for v in field_values(d, "Version")})
    requirements = sorted({r for d in docs for r in field_values(d, "Requires-Dist")})
    pythons = sorted({r for d in docs for r in field_values(d, "Requires-Python")})
    markers = sorted({r.split(";", 1)[1].strip() for r in requirements if ";" in r})
    spec_versions = sorted({v for r in requirements + pythons
                            for v in re.findall(r"[0-9][0-9A-Za-z.+!*_-]*", r)})
    all_versions = sorted(set(versions + spec_versions))
    for v in all_versions:
        for m in [v] + version_mutations(v, rnd):
            items += [("version", m), ("canonical", m)]
    for p in pythons:
        items.append(("specifier", p))
    for v in all_versions:
        for m in rnd.sample(version_mutations(v, rnd), 8) + [v]:
            op = rnd.choice(OPS)
            items.append(("specifier", f"{op}{m}"))
            items.append(("specifier", f" {op} {m} , <9"))
    items += [("specifier", s) for s in [">=1.0,", ",", ">=1,,<2", "~=1", "~=1.0", "==1.*",
                                         "==1.0+local.*", ">=1.0+local", "===foo bar", "=== é",
                                         ">=2.0.0b", ">=1.0-1", ">=1.0.post", "=>1"]]
    for m in markers:
        items += [("marker", x) for x in marker_mutations(m, rnd)]
    items += [("marker", x) for x in marker_templates(rnd, 600)]
    items += [("marker_eval", x) for k, x in list(items) if k == "marker"]
    items += [("marker_eval", x) for x in marker_values(rnd, 2000)]
    for r in requirements:
        items += [("requirement", x) for x in requirement_mutations(r, rnd, all_versions)]
    items += [("requirement", r) for r in ["cffi>=2.0.0b", "cffi>=1.0-1", "cffi>=1.0.post",
                                           "cffi; this is not a marker", "a===é", "a ===é ; os_name=='a'"]]
    names = [x for f in corpus for x in filename_mutations(f, rnd)]
    names += [random_wheel_filename(rnd) for _ in range(6000)]
    items += [(kind, x) for x in names for kind in ("wheel_filename", "index_wheel_filename")]
    for d in docs:
        items += [("metadata", x) for x in metadata_mutations(d, rnd, requirements)]
    items += [("sort", "\n".join(batch)) for batch in sort_batches(rnd, all_versions)]
    items += [("same_version", pair) for pair in version_pairs(rnd)]
    seen, out = set(), []
    for it in items:
        if it not in seen:
            seen.add(it)
            out.append(it)
    return out
