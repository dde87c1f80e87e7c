#include "validate/validate.h"

#include <gtest/gtest.h>

#include <climits>
#include <fstream>
#include <map>
#include <regex>

#include "../support/expect.h"
#include "archive/zip_reader.h"
#include "archive/zip_writer.h"
#include "core/fs.h"
#include "core/process.h"
#include "core/strings.h"
#include "elf/elf.h"
#include "packaging/wheel_name.h"
#include "unit/source_dir.h"
#include "validate/checks.h"
#include "wheel/metadata.h"
#include "wheel/tags.h"
#include "wheel/writer.h"

namespace kiln::validate {
namespace {

const CheckResult& check(const Report& r, const std::string& id) {
  const CheckResult* c = r.find(id);
  if (!c) throw std::runtime_error("no check " + id);
  return *c;
}

// "fail: <message>" of a check, for readable assertions.
std::string said(const Report& r, const std::string& id) {
  const auto& c = check(r, id);
  return cat(verdict_name(c.verdict), ": ", c.message);
}

std::string details(const Report& r, const std::string& id) {
  return join(check(r, id).details, "\n");
}

class Validate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir(TempDir::create(fs::temp_directory_path(), "kiln-validate-").value());
    build_binaries();
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  // Real ELF files, compiled once for the suite: a stand-in libc10.so, an extension module using it
  // (and one symbol it lacks), a dirty variant, and a library carrying a fatbin section.
  static void build_binaries() {
    const fs::path d = dir_->path();
    fs::create_directories(d / "torch" / "lib");
    std::ofstream(d / "c10.cpp") << "namespace c10 { void present(int) {} }\n";
    run_capture({"g++", "-shared", "-fPIC", "-o", (d / "torch/lib/libc10.so").string(),
                 (d / "c10.cpp").string()})
        .value();
    // getrandom needs GLIBC_2.25, so the module needs manylinux_2_26 or newer.
    std::ofstream(d / "ext.cpp")
        << "#include <sys/random.h>\n"
           "namespace c10 { void present(int); void removed(const char*); }\n"
           "extern \"C\" int Py_IsInitialized();\n"
           "extern \"C\" void* PyInit_ext() { char b[4]; getrandom(b, 4, 0);\n"
           "  c10::present(Py_IsInitialized()); c10::removed(\"x\"); return 0; }\n";
    run_capture({"g++", "-shared", "-fPIC", "-o", (d / "ext.so").string(), (d / "ext.cpp").string(),
                 "-L" + (d / "torch/lib").string(), "-lc10"})
        .value();
    std::ofstream(d / "foo.c") << "int foo(void) { return 1; }\n";
    run_capture({"gcc", "-shared", "-fPIC", "-Wl,-soname,libfoo.so.1", "-o",
                 (d / "libfoo.so").string(), (d / "foo.c").string()})
        .value();
    std::ofstream(d / "dirty.c")
        << "int foo(void);\nconst char* where = \"/root/build/src/dirty.c\";\n"
           "const char* kilns = \"/tmp/kiln-build/0123456789abcdef/src/dirty.c\";\n"
           "void* PyInit_dirty(void) { return (void*)(long)foo(); }\n";
    run_capture({"gcc", "-shared", "-fPIC", "-o", (d / "dirty.so").string(),
                 (d / "dirty.c").string(), "-L" + d.string(), "-lfoo", "-Wl,-rpath,/opt/build/lib",
                 "-Wl,--enable-new-dtags"})
        .value();
    // numpy's bundled libgfortran needs libz.so.1, which auditwheel's policies allow.
    std::ofstream(d / "zuse.c") << "const char* zlibVersion(void);\nint puts(const char*);\n"
                                   "void* PyInit_zuse(void) { puts(zlibVersion()); return 0; }\n";
    run_capture(
        {"gcc", "-shared", "-fPIC", "-o", (d / "zuse.so").string(), (d / "zuse.c").string(), "-lz"})
        .value();
    // Device code: the fatbin fixtures put into real shared objects, as nvcc's host code would.
    std::ofstream(d / "dev.c") << "void* PyInit_dev(void) { return 0; }\n";
    run_capture({"gcc", "-shared", "-fPIC", "-o", (d / "dev.so").string(), (d / "dev.c").string()})
        .value();
    fs::path data = fs::path(kiln::test::source_dir()) / "tests/data/fatbin";
    for (const char* f : {"multi", "variants"})
      run_capture({"objcopy", "--add-section",
                   cat(".nv_fatbin=", (data / (std::string(f) + ".fatbin")).string()),
                   (d / "dev.so").string(), (d / (std::string(f) + ".so")).string()})
          .value();
  }

  static std::string bytes(const std::string& name) {
    return read_file(dir_->path() / name).value();
  }

  // A wheel written by kiln's own writer. Compiled files get a manylinux tag computed from them.
  fs::path write(const std::string& name, const std::vector<wheel::WheelEntry>& files,
                 const std::string& tag = "", const std::string& provenance = "",
                 const std::string& version = "1.0",
                 const std::vector<std::string>& requires_dist = {}) {
    wheel::WheelSpec spec;
    spec.distribution = "demo_pkg";
    spec.version = version;
    spec.metadata.name = "demo-pkg";
    spec.metadata.version = version;
    spec.metadata.requires_python = ">=3.9";
    spec.metadata.requires_dist = requires_dist;
    spec.files = files;
    spec.provenance_json = provenance;
    if (tag.empty()) {
      spec.tag = "py3-none-any";
      spec.root_is_purelib = true;
    } else {
      spec.tag = tag;
    }
    fs::path out = dir_->path() / "out" / name;
    fs::create_directories(out);
    return wheel::write_wheel(spec, out).value();
  }

  fs::path pure() {
    return write(cat("pure", counter_++), {{"demo_pkg/__init__.py", "x = 1\n", false},
                                           {"demo_pkg/util.py", "y = 2\n", false}});
  }

  // Rewrites a wheel's entries through `change` (name -> bytes, in order) into `filename`; RECORD
  // is recomputed when `fix_record`, so exactly one thing is wrong.
  fs::path rewrite(
      const fs::path& wheel, const std::string& filename,
      const std::function<void(std::vector<std::pair<std::string, std::string>>&)>& change,
      bool fix_record = false) {
    auto zip = archive::ZipReader::open(wheel).value();
    std::vector<std::pair<std::string, std::string>> entries;
    for (const auto& e : zip.entries()) entries.emplace_back(e.name, zip.read(e).value());
    change(entries);
    if (fix_record) {
      std::vector<wheel::RecordRow> rows;
      std::string record_name;
      for (const auto& [n, data] : entries) {
        if (n.ends_with(".dist-info/RECORD"))
          record_name = n;
        else
          rows.push_back({n, wheel::record_hash(data), std::to_string(data.size())});
      }
      rows.push_back({record_name, "", ""});
      for (auto& [n, data] : entries)
        if (n == record_name) data = wheel::render_record(rows);
    }
    fs::path out = dir_->path() / "out" / cat("rw", counter_++);
    fs::create_directories(out);
    auto writer = archive::ZipWriter::create(out / filename).value();
    for (const auto& [n, data] : entries) writer.add(n, data).value();
    writer.finish().value();
    return out / filename;
  }

  static std::string& entry(std::vector<std::pair<std::string, std::string>>& entries,
                            const std::string& suffix) {
    for (auto& [n, data] : entries)
      if (n.ends_with(suffix)) return data;
    throw std::runtime_error("no entry " + suffix);
  }

  static Report run(const fs::path& wheel, const Options& options = {}) {
    return validate_wheel(wheel, options).value();
  }

  toolchain::TorchSysroot fake_torch() {
    toolchain::TorchSysroot t;
    t.root = dir_->path() / "torch";
    t.version = "2.11.0+cu130";
    t.cuda = "13.0";
    return t;
  }

  std::string platform_of(const std::vector<std::string>& files) {
    std::vector<elf::ElfInfo> infos;
    for (const auto& f : files) infos.push_back(elf::read_elf(bytes(f), f).value());
    return wheel::manylinux_tag(infos).value().tag;
  }

  static TempDir* dir_;
  int counter_ = 0;
};

TempDir* Validate::dir_ = nullptr;

TEST_F(Validate, PureWheelFromOurWriterPasses) {
  Report r = run(pure());
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(check(r, "archive").verdict, Verdict::Pass) << said(r, "archive");
  EXPECT_EQ(check(r, "metadata").verdict, Verdict::Pass) << said(r, "metadata");
  EXPECT_EQ(check(r, "tags").verdict, Verdict::Pass) << said(r, "tags");
  for (const char* id : {"elf", "torch-abi", "gpu-code"})
    EXPECT_EQ(check(r, id).verdict, Verdict::Skip) << id;
  EXPECT_EQ(check(r, "archive").data["hashes_checked"], 4);  // two files, METADATA, WHEEL
  nlohmann::json j = render_json({r});
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["wheels"][0]["checks"].size(), 7u);
  EXPECT_EQ(said(r, "imports"),
            "pass: 2 Python file(s), 0 import(s): every module imported from the wheel's own "
            "packages is in it; every extension exports PyInit_<name>");
  std::string junit = render_junit({r});
  EXPECT_CONTAINS(junit, "<testcase classname=\"demo_pkg-1.0-py3-none-any.whl\" name=\"archive\">");
  EXPECT_CONTAINS(junit, "<skipped message=\"no ELF files (a pure wheel)\"/>");
  EXPECT_CONTAINS(render_text(r, false), "demo_pkg-1.0-py3-none-any.whl: ok");
  // A message or detail quoting a stranger's bytes stays on its line, its controls shown.
  r.checks[0].verdict = Verdict::Fail;
  r.checks[0].message = "bad name 'x\x1b[2K\r  pass  archive'";
  r.checks[0].details = {"detail\nforged line"};
  std::string text = render_text(r, false);
  EXPECT_CONTAINS(text, "bad name 'x\\x1b[2K\\x0d  pass  archive'");
  EXPECT_CONTAINS(text, "detail\\x0aforged line");
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_EQ(text.find('\r'), std::string::npos);
}

TEST_F(Validate, TargetArchsApplyOnlyToWheelsWithBinaries) {
  // `kiln validate --target T` on a target's whole job: its pure wheels carry no GPU code and
  // that is right; an explicit --archs still holds every wheel to it.
  Options o;
  o.archs = manifest::ArchList::parse("9.0").value();
  o.archs_from = "target gpu-host";
  Report r = run(pure(), o);
  EXPECT_TRUE(r.ok()) << said(r, "gpu-code");
  EXPECT_EQ(check(r, "gpu-code").verdict, Verdict::Skip);
  o.archs_from = "--archs";
  Report strict = run(pure(), o);
  EXPECT_FALSE(strict.ok());
  EXPECT_CONTAINS(said(strict, "gpu-code"), "no ELF files, but sm_90 was requested (--archs)");
}

TEST_F(Validate, ReadsBackPythonWrittenWheels) {
  // A wheel as setuptools/wheel would write it: zipfile, RECORD with quoting, directories.
  fs::path out = dir_->path() / "out" / "py";
  fs::create_directories(out);
  fs::path wheel = out / "other_pkg-2.0-py3-none-any.whl";
  std::string script = R"(
import base64, csv, hashlib, io, sys, zipfile
files = {'other_pkg/__init__.py': b'', 'other_pkg/a,b.txt': b'comma',
         'other_pkg-2.0.dist-info/METADATA': b'Metadata-Version: 2.1\nName: Other_Pkg\nVersion: 2.0\nRequires-Python: >=3.8\n',
         'other_pkg-2.0.dist-info/WHEEL': b'Wheel-Version: 1.0\nGenerator: x\nRoot-Is-Purelib: true\nTag: py3-none-any\n'}
rec = io.StringIO()
w = csv.writer(rec, lineterminator='\n')
for n, d in files.items():
    h = base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()
    w.writerow([n, 'sha256=' + h, len(d)])
w.writerow(['other_pkg-2.0.dist-info/RECORD', '', ''])
with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:
    z.writestr('other_pkg/', '')
    for n, d in files.items(): z.writestr(n, d)
    z.writestr('other_pkg-2.0.dist-info/RECORD', rec.getvalue())
)";
  run_capture({"python3", "-c", script, wheel.string()}).value();
  Report r = run(wheel);
  EXPECT_TRUE(r.ok()) << render_text(r, true);
}

TEST_F(Validate, ImportsWithAPython) {
  Options o;
  o.import_with = find_program("python3").string();
  if (o.import_with.empty()) GTEST_SKIP() << "python3 is not installed";
  Report r = run(pure(), o);
  EXPECT_EQ(said(r, "import"), cat("pass: imported demo_pkg with ", o.import_with));
  fs::path broken = write(
      "broken", {{"demo_pkg/__init__.py", "raise RuntimeError('needs a GPU driver')\n", false}});
  EXPECT_EQ(said(run(broken, o), "import"),
            "fail: import demo_pkg: RuntimeError: needs a GPU driver");
  // A module the environment already has is not the wheel's.
  fs::path shadow = write("shadow", {{"json/__init__.py", "", false}});
  EXPECT_CONTAINS(said(run(shadow, o), "import"), "fail: import json: imported from ");
  EXPECT_EQ(run(pure()).find("import"), nullptr);  // only when asked
}

TEST_F(Validate, ByteFlippedFileFailsRecord) {
  fs::path bad = rewrite(pure(), "demo_pkg-1.0-py3-none-any.whl",
                         [](auto& e) { entry(e, "/util.py")[0] = 'z'; });
  Report r = run(bad);
  EXPECT_FALSE(r.ok());
  EXPECT_CONTAINS(said(r, "archive"),
                  "fail: sha256 of demo_pkg/util.py does not match RECORD (RECORD: ");
}

TEST_F(Validate, FileMissingFromRecordAndExtraFile) {
  fs::path extra = rewrite(pure(), "demo_pkg-1.0-py3-none-any.whl", [](auto& e) {
    e.insert(e.begin() + 1, {"demo_pkg/sneaky.py", "import os\n"});
  });
  EXPECT_CONTAINS(said(run(extra), "archive"),
                  "fail: demo_pkg/sneaky.py is in the wheel but not in RECORD");
  fs::path missing =
      rewrite(pure(), "demo_pkg-1.0-py3-none-any.whl", [](auto& e) { e.erase(e.begin()); });
  EXPECT_CONTAINS(said(run(missing), "archive"),
                  "fail: RECORD lists demo_pkg/__init__.py, which is not in the wheel");
  fs::path own_row = rewrite(pure(), "demo_pkg-1.0-py3-none-any.whl", [](auto& e) {
    auto& rec = entry(e, "/RECORD");
    rec.replace(rec.find("RECORD,,"), 8, "RECORD,sha256=abc,12");
  });
  EXPECT_CONTAINS(said(run(own_row), "archive"),
                  "RECORD's own row must have an empty hash and size");
  fs::path twice = rewrite(pure(), "demo_pkg-1.0-py3-none-any.whl", [](auto& e) {
    auto& rec = entry(e, "/RECORD");
    rec = rec.substr(0, rec.find('\n') + 1) + rec;
  });
  EXPECT_CONTAINS(said(run(twice), "archive"), "is listed twice (first on line 1)");
  fs::path size = rewrite(pure(), "demo_pkg-1.0-py3-none-any.whl", [](auto& e) {
    auto& rec = entry(e, "/RECORD");
    rec.replace(rec.find(",6\n"), 3, ",7\n");
  });
  EXPECT_CONTAINS(said(run(size), "archive"), "does not match RECORD (RECORD: 7, file: 6)");
}

// RECORD as pip reads it (csv.reader(text.splitlines())): a line break inside a quoted path ends
// the line for pip, which joins the parts without it; a path that differs from the wheel's
// entries that way fails. A member whose name holds a line break fails as a zip entry.
TEST_F(Validate, RecordIsReadAsPipReadsIt) {
  for (const char* brk : {"\x0c", "\x1d", "\xe2\x80\xa8", "\r"}) {
    SCOPED_TRACE(::testing::PrintToString(brk));
    fs::path split_path = rewrite(pure(), "demo_pkg-1.0-py3-none-any.whl", [&](auto& e) {
      auto& rec = entry(e, "/RECORD");
      rec.replace(rec.find("demo_pkg/util.py,"), 17, cat("\"demo_pkg/util.py", brk, "../x\","));
    });
    EXPECT_CONTAINS(said(run(split_path), "archive"),
                    "RECORD lists demo_pkg/util.py../x, which is not in the wheel");
  }
  fs::path empty_line = rewrite(pure(), "demo_pkg-1.0-py3-none-any.whl", [](auto& e) {
    auto& rec = entry(e, "/RECORD");
    rec.insert(rec.find('\n') + 1, "\n");
  });
  EXPECT_CONTAINS(said(run(empty_line), "archive"),
                  "RECORD line 2: an empty line (installers fail on it)");
  fs::path out = dir_->path() / "out" / "cr";
  fs::create_directories(out);
  fs::path wheel = out / "demo_pkg-1.0-py3-none-any.whl";
  run_capture({"python3", "-c", R"(
import base64, hashlib, sys, zipfile
files = {'demo_pkg/__init__.py': b'', 'demo_pkg/x\r/victim': b'x',
         'demo_pkg-1.0.dist-info/METADATA': b'Metadata-Version: 2.1\nName: demo_pkg\nVersion: 1.0\n',
         'demo_pkg-1.0.dist-info/WHEEL': b'Wheel-Version: 1.0\nGenerator: x\nRoot-Is-Purelib: true\nTag: py3-none-any\n'}
rec = ''.join('"%s",sha256=%s,%d\n' % (n, base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode(), len(d))
              for n, d in files.items()) + 'demo_pkg-1.0.dist-info/RECORD,,\n'
with zipfile.ZipFile(sys.argv[1], 'w') as z:
    for n, d in files.items(): z.writestr(n, d)
    z.writestr('demo_pkg-1.0.dist-info/RECORD', rec)
)",
               wheel.string()})
      .value();
  EXPECT_CONTAINS(said(run(wheel), "archive"),
                  "entry 'demo_pkg/x?/victim' has a control character (\\x0d) in its name");
}

TEST_F(Validate, WrongTagFails) {
  fs::path bad = rewrite(pure(), "demo_pkg-1.0-py2-none-any.whl", [](auto&) {});
  Report r = run(bad);
  EXPECT_EQ(said(r, "tags"),
            "fail: WHEEL's tags (py3-none-any) differ from the file name's (py2-none-any)");
  EXPECT_EQ(check(r, "archive").verdict, Verdict::Pass);
}

TEST_F(Validate, MetadataProblems) {
  auto meta = [&](const std::string& from, const std::string& to,
                  const std::string& file = "demo_pkg-1.0-py3-none-any.whl") {
    return run(rewrite(
        pure(), file,
        [&](auto& e) {
          auto& m = entry(e, "/METADATA");
          m.replace(m.find(from), from.size(), to);
        },
        /*fix_record=*/true));
  };
  Report name = meta("Name: demo-pkg", "Name: other-pkg");
  EXPECT_EQ(check(name, "archive").verdict, Verdict::Pass);
  EXPECT_CONTAINS(said(name, "metadata"),
                  "fail: METADATA Name 'other-pkg' does not match the file name's 'demo_pkg'");
  EXPECT_CONTAINS(said(meta("Version: 1.0", "Version: 1.1"), "metadata"),
                  "fail: METADATA Version 1.1 does not match the file name's 1.0");
  // One version spelled two ways is one version for PEP 440 and installers (pip compares
  // Version objects); how it is spelled is kiln's rule: a warning on others' wheels.
  Report v01 = meta("Version: 1.0", "Version: V01.0");
  std::string spelled = said(v01, "metadata");
  EXPECT_EQ(spelled.find("fail"), std::string::npos) << spelled;
  EXPECT_CONTAINS(spelled, "warn: METADATA Version V01.0 is spelled 1.0 in the file name");
  EXPECT_CONTAINS(details(v01, "metadata"),
                  "METADATA Version V01.0 is spelled 1.0 in demo_pkg-1.0.dist-info");
  std::string padded =
      said(meta("Version: 1.0", "Version: 1.0", "demo_pkg-1.0.0-py3-none-any.whl"), "metadata");
  EXPECT_EQ(padded.find("fail"), std::string::npos) << padded;
  EXPECT_CONTAINS(padded, "warn: METADATA Version 1.0 is spelled 1.0.0 in the file name");
  EXPECT_CONTAINS(said(meta("Version: 1.0", "Version: 1.0.post0"), "metadata"),
                  "fail: METADATA Version 1.0.post0 does not match the file name's 1.0");
  // Requires-Python is optional in the standard; kiln's own wheels must say which Pythons they run.
  EXPECT_EQ(said(meta("Requires-Python: >=3.9\n", ""), "metadata"),
            "warn: METADATA has no Requires-Python (kiln's rule for its own wheels: a warning for "
            "others)");
  EXPECT_CONTAINS(
      said(meta("Requires-Python: >=3.9\n", "Requires-Python: >=3.9\nbroken line\n"), "metadata"),
      "is not a 'Name: value' header");
  // As strict as packaging's Metadata.from_email(validate=True): fields the declared version does
  // not have, unknown fields, duplicates of single fields, malformed values.
  EXPECT_CONTAINS(
      said(meta("Metadata-Version: 2.4", "Metadata-Version: 2.1\nLicense-Expression: MIT"),
           "metadata"),
      "fail: METADATA field License-Expression was introduced in metadata version 2.4, not 2.1");
  EXPECT_CONTAINS(said(meta("Metadata-Version: 2.4", "Metadata-Version: 2.0"), "metadata"),
                  "Metadata-Version '2.0' is not a known core metadata version");
  EXPECT_CONTAINS(
      said(meta("Requires-Python: >=3.9\n", "Requires-Python: >=3.9\nBanana: 1\n"), "metadata"),
      "fail: METADATA field 'Banana' is not a core metadata field");
  EXPECT_CONTAINS(
      said(meta("Name: demo-pkg\n", "Name: demo-pkg\nSummary: a\nSummary: b\n"), "metadata"),
      "fail: METADATA has Summary twice");
  for (auto [field, message] : std::vector<std::pair<std::string, std::string>>{
           {"License-Expression: MIT License",
            "License-Expression 'MIT License' is invalid: not an SPDX"},
           {"License-Expression: Banana", "unknown SPDX license 'banana'"},
           {"License-Expression: MIT WITH Banana", "unknown SPDX license exception 'banana'"},
           {"License-File: ../LICENSE", "License-File '../LICENSE' names a parent directory"},
           {"License-File: LICENSE", "License-File 'LICENSE' names no file of the wheel"},
           {"Provides-Extra: not valid!", "Provides-Extra 'not valid!' is not a valid name"},
           {"Description-Content-Type: text/html", "Description-Content-Type 'text/html' must be"},
           {"Description-Content-Type: text/markdown; variant=Foo", "Markdown variant"},
           {"Dynamic: Version", "Dynamic 'Version' is not a field that may be dynamic"},
           {"Project-URL: Home", "Project-URL 'Home' is not 'Label, URL'"},
           {"Project-URL: A, https://a\nProject-URL: A, https://b", "label 'A' is used twice"},
       })
    EXPECT_CONTAINS(
        said(meta("Requires-Python: >=3.9\n", "Requires-Python: >=3.9\n" + field + "\n"),
             "metadata"),
        message)
        << field;
  Report fine = meta("Requires-Python: >=3.9\n",
                     "Requires-Python: >=3.9\nLicense-Expression: mit AND (Apache-2.0 WITH "
                     "LLVM-exception OR LicenseRef-Ours)\nProject-URL: Home, https://a\n");
  EXPECT_EQ(check(fine, "metadata").verdict, Verdict::Pass) << said(fine, "metadata");
  // A non-normalised local label (the file name and directory carry it too).
  fs::path upper = write("upper", {{"demo_pkg/__init__.py", "", false}}, "", "", "1.0+CU130");
  EXPECT_CONTAINS(said(run(upper), "metadata"), "local version label 'CU130' is not normalised");
}

// METADATA fields of 60 KB and 1 MB from a foreign wheel (std::regex overflowed the stack on
// them: SIGSEGV): a failing metadata check naming the cap, never a crash.
TEST_F(Validate, LongMetadataFieldsFailTheMetadataCheck) {
  auto meta = [&](const std::string& from, const std::string& to) {
    return run(rewrite(
        pure(), "demo_pkg-1.0-py3-none-any.whl",
        [&](auto& e) {
          auto& m = entry(e, "/METADATA");
          m.replace(m.find(from), from.size(), to);
        },
        /*fix_record=*/true));
  };
  for (std::size_t size : {std::size_t{60000}, std::size_t{1} << 20}) {
    const std::string big(size, 'x');
    Report dist = meta("Requires-Python: >=3.9\n",
                       "Requires-Python: >=3.9\nRequires-Dist: torch>=" + big + "\n");
    EXPECT_EQ(said(dist, "metadata"), "fail: METADATA Requires-Dist 'torch>=" +
                                          std::string(53, 'x') + "...' is longer than 4096 bytes");
    Report marker =
        meta("Requires-Python: >=3.9\n", "Requires-Python: >=3.9\nRequires-Dist: a; " + big + "\n");
    EXPECT_CONTAINS(said(marker, "metadata"), "is longer than 4096 bytes");
    Report python =
        meta("Requires-Python: >=3.9", "Requires-Python: >=3." + std::string(size, '9'));
    EXPECT_CONTAINS(said(python, "metadata"), "fail: METADATA Requires-Python '>=3.999");
    EXPECT_CONTAINS(said(python, "metadata"), "...' is longer than 4096 bytes");
    Report name = meta("Name: demo-pkg", "Name: " + big);
    EXPECT_EQ(said(name, "metadata"),
              "fail: METADATA Name '" + std::string(60, 'x') + "...' is longer than 200 bytes");
    // Any other header line of that length is checked in one pass, and fine.
    Report summary =
        meta("Requires-Python: >=3.9\n", "Requires-Python: >=3.9\nSummary: " + big + "\n");
    EXPECT_EQ(check(summary, "metadata").verdict, Verdict::Pass) << said(summary, "metadata");
    Report header = meta("Requires-Python: >=3.9\n", "Requires-Python: >=3.9\n" + big + "\n");
    EXPECT_CONTAINS(said(header, "metadata"), "is not a 'Name: value' header: xxxx");
    Report version = meta("Metadata-Version: 2.4", "Metadata-Version: 2." + std::string(size, '1'));
    EXPECT_CONTAINS(said(version, "metadata"), "Metadata-Version '2." + std::string(58, '1') +
                                                   "...' is not a known core metadata version");
    // Whatever a finding quotes, no line of the report is longer than 1 KiB and its size note
    // (a 2.5 MB field was once printed in one line).
    for (const Report* r : {&dist, &marker, &python, &name, &summary, &header, &version})
      for (const auto& c : r->checks) {
        EXPECT_LE(c.message.size(), 1100u) << c.id;
        for (const auto& d : c.details) EXPECT_LE(d.size(), 1100u) << c.id;
      }
  }
  // Under the cap: the requirement is checked (in one pass).
  Report ok =
      meta("Requires-Python: >=3.9\n",
           "Requires-Python: >=3.9\nRequires-Dist: a; extra == '" + std::string(4000, 'x') + "'\n");
  EXPECT_EQ(check(ok, "metadata").verdict, Verdict::Pass) << said(ok, "metadata");
}

TEST_F(Validate, ProvenanceTorchPinAndLabel) {
  nlohmann::json prov = {{"tools", {{"torch", {{"version", "2.11.0+cu130"}, {"cuda", "13.0"}}}}},
                         {"inputs", {{"target", {{"cuda", {{"version", "13.0"}}}}}}}};
  fs::path good = write("pin-good", {{"demo_pkg/__init__.py", "", false}}, "", prov.dump(),
                        "1.0+cu130torch2.11", {"torch==2.11.*"});
  Report r = run(good);
  EXPECT_EQ(check(r, "metadata").verdict, Verdict::Pass) << said(r, "metadata");
  fs::path wrong = write("pin-wrong", {{"demo_pkg/__init__.py", "", false}}, "", prov.dump(),
                         "1.0+cu130torch2.11", {"torch>=2.0"});
  EXPECT_CONTAINS(said(run(wrong), "metadata"),
                  "Requires-Dist 'torch>=2.0' does not pin the torch it was built against");
  fs::path label = write("pin-label", {{"demo_pkg/__init__.py", "", false}}, "", prov.dump(),
                         "1.0+cu128torch2.11", {"torch==2.11.*"});
  EXPECT_CONTAINS(said(run(label), "metadata"),
                  "does not name the build's CUDA and torch (want 'cu130torch2.11')");
}

TEST_F(Validate, AWrongTypedProvenanceFailsNamingTheField) {
  std::string tag = cat("cp311-cp311-", platform_of({"ext.so"}));
  for (auto [prov, message] : std::vector<std::pair<nlohmann::json, std::string>>{
           {{{"tools", {{"torch", "2.11"}}}}, "kiln.json: tools.torch is a string, not an object"},
           {{{"inputs", {{"toolchain", {{"python", "3.11"}}}}}},
            "kiln.json: inputs.toolchain.python is a string, not an object"},
           {{{"tools", {{"torch", {{"version", "2.11.0"}}}}},
             {"inputs", {{"target", {{"cuda", "13.0"}}}}}},
            "kiln.json: inputs.target.cuda is a string, not an object"},
           {{{"archs", 90}}, "kiln.json: archs is an integer, not a string"}}) {
    fs::path w = write(cat("typed", counter_++),
                       {{"ext.cpython-311-x86_64-linux-gnu.so", bytes("ext.so"), true}}, tag,
                       prov.dump(), "1.0+cu130torch2.11", {"torch==2.11.*"});
    Options o;
    o.torch = fake_torch();
    Report r = run(w, o);
    EXPECT_EQ(check(r, "metadata").verdict, Verdict::Fail) << said(r, "metadata");
    EXPECT_CONTAINS(said(r, "metadata"), message);
    WheelSummary s = summarize(w).value();
    EXPECT_FALSE(s.provenance);
    EXPECT_EQ(s.provenance_error, message);
  }
  // Not JSON at all.
  fs::path garbage = write("garbage", {{"demo_pkg/__init__.py", "", false}}, "", "{\"kiln\": ");
  EXPECT_CONTAINS(said(run(garbage), "metadata"), "fail: kiln.json is not valid JSON");
}

TEST_F(Validate, CorruptZipsFailTheArchiveCheck) {
  fs::path good = pure();
  std::string b = read_file(good).value();
  fs::path trunc = dir_->path() / "out" / "trunc" / good.filename();
  fs::create_directories(trunc.parent_path());
  write_file_atomic(trunc, std::string_view(b).substr(0, b.size() - 100)).value();
  Report r = run(trunc);
  EXPECT_FALSE(r.ok());
  EXPECT_CONTAINS(said(r, "archive"), "no end-of-central-directory record (truncated");
  EXPECT_EQ(check(r, "metadata").verdict, Verdict::Skip);

  // The local header's CRC of the first entry (offset 14) no longer matches the central directory.
  b[14] = static_cast<char>(b[14] ^ 0xff);
  fs::path local = dir_->path() / "out" / "local" / good.filename();
  fs::create_directories(local.parent_path());
  write_file_atomic(local, b).value();
  EXPECT_CONTAINS(
      said(run(local), "archive"),
      "fail: zip demo_pkg-1.0-py3-none-any.whl: entry 'demo_pkg/__init__.py': local header CRC");
}

// `zip` with the uncompressed size its local header and central directory state for the entry
// `name` set to `size`: a directory that lies.
std::string with_stated_size(std::string zip, const std::string& name, std::uint32_t size) {
  int patched = 0;
  for (std::size_t at = zip.find(name); at != std::string::npos; at = zip.find(name, at + 1)) {
    std::size_t field = 0;
    if (at >= 30 && zip.compare(at - 30, 4, "PK\x03\x04") == 0)
      field = at - 30 + 22;
    else if (at >= 46 && zip.compare(at - 46, 4, "PK\x01\x02") == 0)
      field = at - 46 + 24;
    else
      continue;
    for (int i = 0; i < 4; ++i) zip[field + i] = static_cast<char>((size >> (8 * i)) & 0xff);
    ++patched;
  }
  EXPECT_EQ(patched, 2) << name;
  return zip;
}

// METADATA, WHEEL, RECORD and kiln.json are held whole, so each may be at most 16 MiB
// (docs/manifest.md, "Limits"): past that the archive check fails naming the limit, and nothing
// past it is inflated, whether the zip's directory says so or lies.
TEST_F(Validate, TextFilesPastTheirLimitFailNamingIt) {
  const std::string info = "demo_pkg-1.0.dist-info/";
  const std::string limit = "inflates past 16 MiB (the limit for a wheel's text files)";
  const std::string big(17u << 20, ' ');
  std::size_t stated = 0;
  fs::path metadata = rewrite(
      pure(), "demo_pkg-1.0-py3-none-any.whl",
      [&](auto& e) { stated = (entry(e, "/METADATA") += big).size(); }, /*fix_record=*/true);
  Report r = run(metadata);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(said(r, "archive"),
            cat("fail: zip demo_pkg-1.0-py3-none-any.whl: entry '", info, "METADATA': ", limit,
                "; the directory says ", stated, " bytes"));
  EXPECT_EQ(said(r, "metadata"),
            cat("fail: ", info, "METADATA is unreadable (the archive check says why)"));
  for (const char* name : {"WHEEL", "RECORD", "kiln.json"}) {
    fs::path w = rewrite(pure(), "demo_pkg-1.0-py3-none-any.whl", [&](auto& e) {
      if (std::string(name) == "kiln.json")
        e.emplace_back(info + name, big);
      else
        entry(e, cat("/", name)) += big;
    });
    Report rw = run(w);
    EXPECT_FALSE(rw.ok()) << name;
    EXPECT_CONTAINS(said(rw, "archive") + "\n" + details(rw, "archive"),
                    cat("entry '", info, name, "': ", limit, "; the directory says"));
  }

  // The directory says 16 MiB, the limit, and the member inflates to more: stopped there.
  std::string bytes = read_file(metadata).value();
  fs::path lie = dir_->path() / "out" / "lie" / metadata.filename();
  fs::create_directories(lie.parent_path());
  write_file_atomic(lie, with_stated_size(bytes, info + "METADATA", 16u << 20)).value();
  Report lied = run(lie);
  EXPECT_EQ(said(lied, "archive"),
            cat("fail: zip demo_pkg-1.0-py3-none-any.whl: entry '", info, "METADATA': ", limit));
  // It says less: stopped as soon as it inflates past what it says.
  write_file_atomic(lie, with_stated_size(bytes, info + "METADATA", 1000)).value();
  EXPECT_EQ(said(run(lie), "archive"),
            cat("fail: zip demo_pkg-1.0-py3-none-any.whl: entry '", info,
                "METADATA': inflates to more than the 1000 bytes the directory says"));
}

TEST_F(Validate, NotAWheelIsAnError) {
  fs::path p = dir_->path() / "out" / "x.zip";
  write_file_atomic(p, "hello").value();
  auto r = validate_wheel(p, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::BadInput);
  EXPECT_CONTAINS(r.error().message, "not a wheel file name (it does not end in .whl");
  fs::path q = dir_->path() / "out" / "a-b.whl";
  write_file_atomic(q, "hello").value();
  EXPECT_CONTAINS(validate_wheel(q, {}).error().message, "2 '-'-separated parts instead of 5 or 6");
  EXPECT_CONTAINS(validate_wheel(dir_->path() / "none-1.0-py3-none-any.whl", {}).error().message,
                  "no such file");
  // What packaging's parse_wheel_filename refuses beyond the structure (found by the differential
  // test; 78dc551 read each of these as a wheel's name).
  for (auto [filename, why] : std::vector<std::pair<std::string, std::string>>{
           {"demo__pkg-1.0-py3-none-any.whl", "the name 'demo__pkg' is not a project name"},
           {"demo+pkg-1.0-py3-none-any.whl", "the name 'demo+pkg' is not a project name"},
           {"demo_pkg-1.0.x-py3-none-any.whl", "the version '1.0.x' is not a PEP 440 version"},
           {"demo_pkg-1.0-3py-none-any.whl", "the interpreter tag '3py' is not an identifier"},
           {"demo_pkg-1.0-py3.c+p-none-any.whl",
            "the interpreter tag 'c+p' is not an identifier"}}) {
    auto parsed = packaging::parse_wheel_file_name(filename);
    ASSERT_FALSE(parsed) << filename;
    EXPECT_CONTAINS(parsed.error().message, why);
  }
  EXPECT_TRUE(
      packaging::parse_wheel_file_name("Demo.Pkg-1.0.POST1+Local-1x-cp311.py3-abi3-any.whl"));
}

TEST_F(Validate, ExtensionSymbolsAgainstTorch) {
  std::string tag = cat("cp311-cp311-", platform_of({"ext.so"}));
  fs::path w = write("ext", {{"ext.cpython-311-x86_64-linux-gnu.so", bytes("ext.so"), true}}, tag);
  Options o;
  o.torch = fake_torch();
  Report r = run(w, o);
  EXPECT_EQ(check(r, "tags").verdict, Verdict::Pass) << said(r, "tags");
  EXPECT_EQ(check(r, "elf").verdict, Verdict::Pass) << said(r, "elf");
  // c10::present resolves against the stand-in libc10.so, Py_IsInitialized is the C API, libstdc++
  // and glibc come from the system; c10::removed is defined nowhere.
  EXPECT_EQ(said(r, "torch-abi"),
            "fail: ext.cpython-311-x86_64-linux-gnu.so: 1 undefined symbol(s) not defined by "
            "torch 2.11.0+cu130, CUDA or the C/C++ runtime: c10::removed(char const*)");
  EXPECT_EQ(check(r, "torch-abi").data["missing"]["ext.cpython-311-x86_64-linux-gnu.so"],
            nlohmann::json::array({"c10::removed(char const*)"}));
  EXPECT_GE(check(r, "torch-abi").data["python_api"].get<int>(), 1);

  // Without a torch the check skips; with the module tagged for another Python, tags fail.
  EXPECT_EQ(check(run(w), "torch-abi").verdict, Verdict::Skip);
  fs::path cp312 = write("ext312", {{"ext.cpython-311-x86_64-linux-gnu.so", bytes("ext.so"), true}},
                         cat("cp312-cp312-", platform_of({"ext.so"})));
  EXPECT_CONTAINS(said(run(cp312), "tags"), "is built for cp311 but the wheel's ABI tag is cp312");
  fs::path any = write("extany", {{"ext.cpython-311-x86_64-linux-gnu.so", bytes("ext.so"), true}});
  EXPECT_CONTAINS(said(run(any), "tags"), "tagged for platform 'any' but holds compiled code");
  fs::path low = write("extlow", {{"ext.cpython-311-x86_64-linux-gnu.so", bytes("ext.so"), true}},
                       "cp311-cp311-manylinux_2_5_x86_64");
  EXPECT_CONTAINS(
      said(run(low), "tags"),
      "platform tag manylinux_2_5_x86_64 promises glibc 2.5 but the ELF files need GLIBC_2.25");
}

TEST_F(Validate, ElfNeededRunpathAndBuildPaths) {
  std::string tag = cat("cp311-cp311-", platform_of({"dirty.so"}));
  fs::path w =
      write("dirty", {{"dirty.cpython-311-x86_64-linux-gnu.so", bytes("dirty.so"), true}}, tag);
  Report r = run(w);
  std::string d = details(r, "elf");
  EXPECT_EQ(check(r, "elf").verdict, Verdict::Fail);
  EXPECT_CONTAINS(
      d, "needs libfoo.so.1, which is neither torch's, CUDA's, a system library manylinux_2_");
  EXPECT_CONTAINS(d, "has RUNPATH /opt/build/lib, which points outside the wheel");
  EXPECT_CONTAINS(d,
                  "warn: dirty.cpython-311-x86_64-linux-gnu.so holds 1 absolute build path(s), "
                  "e.g. /root/build/src/dirty.c");
  // kiln's own build root is the same path on every machine: said, not warned of.
  EXPECT_EQ(d.find("warn: dirty.cpython-311-x86_64-linux-gnu.so holds 2"), std::string::npos) << d;
  EXPECT_CONTAINS(d, "1 path(s) under kiln's fixed build root /tmp/kiln-build");
  // Bundling the library in the wheel satisfies DT_NEEDED.
  fs::path bundled = write("bundled",
                           {{"dirty.cpython-311-x86_64-linux-gnu.so", bytes("dirty.so"), true},
                            {"demo_pkg.libs/libfoo.so.1", bytes("libfoo.so"), true}},
                           tag);
  EXPECT_EQ(details(run(bundled), "elf").find("needs libfoo.so.1"), std::string::npos);
}

// What auditwheel's policies let a wheel take from the system (numpy needs libz.so.1, which kiln
// failed on d7e7835), per platform tag; a wheel with several tags gets what all of them allow.
TEST_F(Validate, ElfSystemLibrariesFollowAuditwheelsPolicy) {
  auto allowed = [](const std::string& platform) {
    return allowed_system_libraries(
        packaging::parse_wheel_file_name(cat("x-1-cp311-cp311-", platform, ".whl")).value());
  };
  EXPECT_TRUE(allowed("manylinux1_x86_64").count("libz.so.1"));
  EXPECT_FALSE(allowed("manylinux1_x86_64").count("libexpat.so.1"));
  EXPECT_TRUE(allowed("manylinux_2_17_x86_64").count("libexpat.so.1"));
  EXPECT_FALSE(allowed("manylinux_2_17_x86_64").count("libmvec.so.1"));
  EXPECT_TRUE(allowed("manylinux_2_28_x86_64").count("libmvec.so.1"));
  EXPECT_FALSE(allowed("manylinux_2_17_x86_64.manylinux_2_28_x86_64").count("libmvec.so.1"));
  EXPECT_TRUE(allowed("musllinux_1_2_x86_64").count("libc.so"));
  EXPECT_FALSE(allowed("musllinux_1_2_x86_64").count("libc.so.6"));
  EXPECT_TRUE(allowed("linux_x86_64").count("libstdc++.so.6"));
  EXPECT_TRUE(allowed("manylinux_2_28_x86_64").count("ld-linux-x86-64.so.2"));

  std::string tag = cat("cp311-cp311-", platform_of({"zuse.so"}));
  fs::path w =
      write("zuse", {{"zuse.cpython-311-x86_64-linux-gnu.so", bytes("zuse.so"), true}}, tag);
  EXPECT_EQ(check(run(w), "elf").verdict, Verdict::Pass) << details(run(w), "elf");
  fs::path musl = write("zmusl", {{"zuse.cpython-311-x86_64-linux-gnu.so", bytes("zuse.so"), true}},
                        "cp311-cp311-musllinux_1_2_x86_64");
  EXPECT_CONTAINS(said(run(musl), "elf") + details(run(musl), "elf"),
                  "needs libc.so.6, which is neither torch's, CUDA's, a system library "
                  "musllinux_1_2_x86_64 allows (auditwheel's policy) nor in the wheel");
}

// nvidia-nvtx-cu12 ships compiled code with Root-Is-Purelib: true; installers take it, so it is
// kiln's rule (it failed on d7e7835): a warning on others' wheels.
TEST_F(Validate, PurelibWithCompiledCodeIsKilnsRule) {
  std::string tag = cat("cp311-cp311-", platform_of({"zuse.so"}));
  fs::path w =
      write("nvtx", {{"zuse.cpython-311-x86_64-linux-gnu.so", bytes("zuse.so"), true}}, tag);
  fs::path purelib = rewrite(
      w, w.filename().string(),
      [](auto& e) {
        auto& text = entry(e, "/WHEEL");
        text.replace(text.find("Root-Is-Purelib: false"), 22, "Root-Is-Purelib: true");
      },
      /*fix_record=*/true);
  Report r = run(purelib);
  EXPECT_EQ(check(r, "tags").verdict, Verdict::Warn) << said(r, "tags");
  EXPECT_CONTAINS(said(r, "tags"), "Root-Is-Purelib is true but the wheel holds compiled code");
}

TEST_F(Validate, GpuCodeAgainstRequestedArchs) {
  std::string tag = cat("cp311-cp311-", platform_of({"multi.so"}));
  fs::path w =
      write("multi", {{"dev.cpython-311-x86_64-linux-gnu.so", bytes("multi.so"), true}}, tag);
  Options o;
  o.archs = manifest::ArchList::parse("9.0;12.0+PTX").value();
  Report r = run(w, o);
  EXPECT_EQ(said(r, "gpu-code"),
            "pass: SASS sm_90, sm_120; PTX compute_120: exactly the requested sm_90;sm_120+ptx "
            "(--archs)");
  EXPECT_EQ(check(r, "gpu-code").data["sass"], nlohmann::json::array({"sm_90", "sm_120"}));
  EXPECT_EQ(check(r, "gpu-code").data["ptx"], nlohmann::json::array({"compute_120"}));
  EXPECT_EQ(render_json({r})["wheels"][0]["archs"]["sass"],
            nlohmann::json::array({"sm_90", "sm_120"}));

  o.archs = manifest::ArchList::parse("9.0;10.0").value();
  std::string d = details(run(w, o), "gpu-code");
  EXPECT_CONTAINS(d, "has no SASS for sm_100 (requested: sm_90;sm_100)");
  EXPECT_CONTAINS(d, "has unexpected SASS for sm_120");
  EXPECT_CONTAINS(d, "has unexpected PTX compute_120");

  // Provenance archs are the default request.
  fs::path p =
      write("multi-prov", {{"dev.cpython-311-x86_64-linux-gnu.so", bytes("multi.so"), true}}, tag,
            nlohmann::json{{"archs", "sm_90"}}.dump());
  EXPECT_CONTAINS(said(run(p), "gpu-code"),
                  "fail: dev.cpython-311-x86_64-linux-gnu.so has unexpected SASS for sm_120 "
                  "(requested: sm_90)");
  // The provenance spells archs canonically ("+ptx" on SASS tokens).
  fs::path both =
      write("multi-prov2", {{"dev.cpython-311-x86_64-linux-gnu.so", bytes("multi.so"), true}}, tag,
            nlohmann::json{{"archs", "sm_90;sm_120+ptx"}}.dump());
  EXPECT_EQ(said(run(both), "gpu-code"),
            "pass: SASS sm_90, sm_120; PTX compute_120: exactly the requested sm_90;sm_120+ptx "
            "(provenance)");
}

TEST_F(Validate, GpuTargetVerdicts) {
  std::string tag = cat("cp311-cp311-", platform_of({"multi.so"}));
  fs::path multi =
      write("gm", {{"dev.cpython-311-x86_64-linux-gnu.so", bytes("multi.so"), true}}, tag);
  fs::path variants =
      write("gv", {{"dev.cpython-311-x86_64-linux-gnu.so", bytes("variants.so"), true}}, tag);
  auto on = [&](const fs::path& w, const char* gpu) {
    Options o;
    o.gpu = manifest::ArchList::parse(gpu).value().archs().front();
    return said(run(w, o), "gpu-target");
  };
  // multi: SASS sm_90, sm_120; PTX compute_120.
  EXPECT_EQ(on(multi, "sm_90"), "pass: runs on sm_90 (SASS present)");
  EXPECT_EQ(on(multi, "sm_120"), "pass: runs on sm_120 (SASS present)");
  EXPECT_EQ(on(multi, "sm_121"), "pass: runs on sm_121 (SASS present)");  // same major, newer minor
  EXPECT_CONTAINS(on(multi, "sm_100"),
                  "fail: dev.cpython-311-x86_64-linux-gnu.so will not run on sm_100: it has SASS "
                  "for sm_90, sm_120 and PTX compute_120");
  EXPECT_CONTAINS(on(multi, "sm_80"), "will not run on sm_80");
  // variants: SASS sm_90a, sm_100f; PTX compute_100a, compute_120f, compute_75.
  EXPECT_EQ(on(variants, "sm_90"), "pass: runs on sm_90 (SASS present)");  // sm_90a: exact match
  EXPECT_EQ(on(variants, "sm_100"), "pass: runs on sm_100 (SASS present)");
  EXPECT_CONTAINS(on(variants, "sm_103"),
                  "warn: dev.cpython-311-x86_64-linux-gnu.so runs on sm_103 only by JIT-compiling "
                  "PTX compute_75");
  EXPECT_CONTAINS(on(variants, "sm_86"),
                  "JIT-compiling PTX compute_75 at load (costs start-up time");
  EXPECT_CONTAINS(on(variants, "sm_70"),
                  "fail: dev.cpython-311-x86_64-linux-gnu.so will not run on sm_70");
}

// The matchers that replaced the checks' regular expressions agree with them on short, tricky
// names, and decide names of 1 MB in one pass (std::regex overflowed the stack on those).
TEST_F(Validate, KilnsMetadataRulesFailItsOwnWheelsAndWarnOnOthers) {
  auto edited = [&](const std::string& provenance, const std::string& version,
                    const std::function<void(std::string&)>& edit) {
    fs::path w = write(cat("rules", counter_++), {{"demo_pkg/__init__.py", "", false}}, "",
                       provenance, version);
    return run(rewrite(
        w, cat("demo_pkg-", version, "-py3-none-any.whl"),
        [&](auto& e) { edit(entry(e, "/METADATA")); }, /*fix_record=*/true));
  };
  auto no_python = [](std::string& m) { m.erase(m.find("Requires-Python: >=3.9\n"), 24); };
  auto bare_url = [](std::string& m) { m += "Project-URL: Home\n"; };
  auto nothing = [](std::string&) {};
  const std::string others = " (kiln's rule for its own wheels: a warning for others)";
  for (auto [version, edit, line] :
       std::vector<std::tuple<std::string, std::function<void(std::string&)>, std::string>>{
           {"1.0", no_python, "METADATA has no Requires-Python"},
           {"1.0", bare_url, "METADATA Project-URL 'Home' is not 'Label, URL'"},
           {"01.0", nothing, "METADATA Version 01.0 is not spelled as PEP 440 normalises it"}}) {
    EXPECT_EQ(said(edited("{}", version, edit), "metadata"), "fail: " + line);
    Report foreign = edited("", version, edit);
    EXPECT_EQ(said(foreign, "metadata"), "warn: " + line + others);
    EXPECT_TRUE(foreign.ok()) << line;
  }
}

TEST_F(Validate, ImportsOfTheWheelsOwnModules) {
  // torchsort's mistake: the package imports .isotonic_cpu, the extension was declared with the
  // bare name and sits at the top level. kiln's rule for its own wheels (a kiln.json); a warning
  // for others' (zstandard imports its optional backend_rust unguarded, and installs fine).
  std::string tag = cat("cp311-cp311-", platform_of({"ext.so"}));
  const std::string so = "ext.cpython-311-x86_64-linux-gnu.so";
  const std::vector<wheel::WheelEntry> bare_files = {
      {"sortpkg/__init__.py", "from .ext import isotonic_kl\n", false},
      {so, bytes("ext.so"), true}};
  fs::path bare = write("bare", bare_files, tag, "{}");
  Report others = run(write("bare-others", bare_files, tag));
  EXPECT_EQ(check(others, "imports").verdict, Verdict::Warn) << said(others, "imports");
  EXPECT_CONTAINS(said(others, "imports"),
                  "(kiln's rule for its own wheels: a warning for others)");
  Report r = run(bare);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(said(r, "imports"),
            "fail: sortpkg/__init__.py:1: imports sortpkg.ext, which is not in the wheel (no "
            "sortpkg/ext.py, sortpkg/ext/__init__.py or extension sortpkg/ext.*.so); the "
            "extension ext.cpython-311-x86_64-linux-gnu.so is elsewhere: a module inside a "
            "package needs a dotted extension name (name = \"sortpkg.ext\")");
  // The dotted name: the extension inside the package.
  fs::path dotted = write("dotted",
                          {{"sortpkg/__init__.py", "from .ext import isotonic_kl\n", false},
                           {"sortpkg/" + so, bytes("ext.so"), true}},
                          tag);
  EXPECT_EQ(check(run(dotted), "imports").verdict, Verdict::Pass) << said(run(dotted), "imports");
  // Guarded by try: a warning.
  fs::path guarded =
      write("guarded",
            {{"sortpkg/__init__.py",
              "try:\n    from .ext import isotonic_kl\nexcept ImportError:\n    pass\n", false},
             {so, bytes("ext.so"), true}},
            tag);
  Report g = run(guarded);
  EXPECT_EQ(check(g, "imports").verdict, Verdict::Warn) << said(g, "imports");
  EXPECT_CONTAINS(said(g, "imports"), "(inside try:, so only a warning)");
  // A module renamed away from its PyInit_ name.
  const std::vector<wheel::WheelEntry> renamed_files = {
      {"sortpkg/__init__.py", "", false}, {"sortpkg/other" + so.substr(3), bytes("ext.so"), true}};
  EXPECT_EQ(said(run(write("renamed", renamed_files, tag, "{}")), "imports"),
            "fail: sortpkg/other.cpython-311-x86_64-linux-gnu.so does not export PyInit_other: "
            "Python could not import it under its file name");
  // torchao's op libraries are loaded with torch.ops.load_library, never imported: no PyInit_.
  EXPECT_EQ(said(run(write("renamed-others", renamed_files, tag)), "imports"),
            "warn: sortpkg/other.cpython-311-x86_64-linux-gnu.so does not export PyInit_other: "
            "Python could not import it under its file name (kiln's rule for its own wheels: a "
            "warning for others)");
  // A module name of 2.5 MB: the finding quotes it cut to 1 KiB, its size said (it was once one
  // 4 MB line of the report).
  Report huge = run(write(
      "huge",
      {{"sortpkg/__init__.py", "import sortpkg." + std::string(2500 << 10, 'x') + "\n", false}},
      tag));
  const CheckResult& imports = check(huge, "imports");
  EXPECT_CONTAINS(imports.message, " bytes)");
  EXPECT_LE(imports.message.size(), 1100u);
  for (const auto& d : imports.details) EXPECT_LE(d.size(), 1100u);
}

TEST_F(Validate, ImportsAcrossWheelsSharingANamespace) {
  // flash-linear-attention ships fla/layers and imports fla.ops, which fla-core ships: fla/ has
  // no __init__.py here, so another wheel may provide it. A regular package's missing module is
  // reported; attributes of a package (from pkg import name) are not modules.
  fs::path w =
      write("ns",
            {{"fla/layers/__init__.py",
              "from fla.ops.gla import chunk_gla\nfrom fla.layers.attn import Attention\n"
              "from fla.layers import helper\nimport os, numpy as np\nfrom . import attn\n",
              false},
             {"fla/layers/attn.py", "from ..ops import x\nfrom .. import y\n", false},
             {"fla/models/__init__.py",
              "from .missing import M\nfrom . import helper2\nfrom . import defined\n"
              "defined = 1\nfrom ... import z\n",
              false}},
            "", "{}");
  Report r = run(w);
  const auto& c = check(r, "imports");
  EXPECT_EQ(c.verdict, Verdict::Fail);
  EXPECT_EQ(c.details.size(), 3u) << details(r, "imports");
  EXPECT_CONTAINS(details(r, "imports"),
                  "fail: fla/models/__init__.py:1: imports fla.models.missing, which is not in");
  EXPECT_CONTAINS(details(r, "imports"),
                  "fail: fla/models/__init__.py:2: imports fla.models.helper2, which is not in");
  EXPECT_CONTAINS(details(r, "imports"),
                  "fail: fla/models/__init__.py:5: 'from ... import' climbs above the top-level");
}

// numpy's __init__.py: "from ._core import (False_, ...)", names _core's __init__.py defines
// through star imports; psutil's platform modules. Both were reported missing on d7e7835.
TEST_F(Validate, ImportsOfNamesFromStarImportsAndOtherPlatforms) {
  fs::path w =
      write("np",
            {{"np/__init__.py",
              "from ._core import (\n    False_, True_)\nfrom ._lazy import anything\n"
              "if WINDOWS:\n    from . import _pswindows\nelif AIX:\n    from . import _psaix\n"
              "else:\n    from . import _posix\n",
              false},
             // A module only a platform's branch imports: its own imports are that platform's.
             {"np/_psaix.py", "from . import _np_aix as cext\n", false},
             {"np/_core/__init__.py", "from .numeric import *\n", false},
             {"np/_core/numeric.py", "False_ = False\nTrue_ = True\n", false},
             {"np/_lazy/__init__.py", "def __getattr__(name):\n    return name\n", false},
             {"np/_posix.py", "", false}},
            "", "{}");
  Report r = run(w);
  EXPECT_EQ(check(r, "imports").verdict, Verdict::Pass) << details(r, "imports");
  // Without the star import, False_ is nowhere: still reported.
  fs::path bare = write("np-bare",
                        {{"np/__init__.py", "from ._core import False_\n", false},
                         {"np/_core/__init__.py", "from .numeric import True_\n", false},
                         {"np/_core/numeric.py", "True_ = True\n", false}},
                        "", "{}");
  EXPECT_CONTAINS(details(run(bare), "imports"),
                  "imports np._core.False_, which is not in the wheel");
  // Imported anywhere without a platform condition, it is every platform's: reported.
  fs::path everywhere = write("np-aix",
                              {{"np/__init__.py", "if AIX:\n    from . import _psaix\n", false},
                               {"np/tools.py", "from np import _psaix\n", false},
                               {"np/_psaix.py", "from . import _np_aix as cext\n", false}},
                              "", "{}");
  EXPECT_CONTAINS(details(run(everywhere), "imports"),
                  "np/_psaix.py:1: imports np._np_aix, which is not in the wheel");
}

std::vector<std::string> imports_of(std::string_view text, std::string_view package = "pkg.sub") {
  std::vector<std::string> out;
  for (const auto& im : scan_imports(text, package)) {
    std::string s = cat(im.line, " ", im.module.empty() ? "?" : im.module);
    if (im.from) s += cat(" [", join(im.names, ","), "]");
    if (im.guarded) s += " try";
    if (im.type_checking) s += " tc";
    if (im.platform) s += " platform";
    out.push_back(s);
  }
  return out;
}

// psutil imports each platform's module under `if WINDOWS:`, `elif LINUX:`: the others are not in
// a Linux wheel (they were reported missing on d7e7835). An else or elif of such an if is on the
// platform too; a try's else is not.
TEST(ValidateImportScanner, PlatformConditions) {
  using V = std::vector<std::string>;
  EXPECT_EQ(imports_of("if WINDOWS:\n    from . import _pswindows as p\nelif LINUX:\n"
                       "    from . import _pslinux as p\nelse:\n    import _other\n"
                       "if sys.platform == 'win32': import winreg\n"
                       "if os.name == 'nt':\n    pass\nelif x:\n    import y\n"
                       "if IS_MACOS and x:\n    import z\n"),
            (V{"2 pkg.sub [_pswindows] platform", "4 pkg.sub [_pslinux] platform",
               "6 _other platform", "7 winreg platform", "11 y platform", "13 z platform"}));
  EXPECT_EQ(imports_of("if x:\n    import a\nelse:\n    import b\n"
                       "if WINDOWS:\n    pass\ntry:\n    import c\nexcept E:\n    pass\n"
                       "else:\n    import d\nif WINDOWSX or linux:\n    import e\n"),
            (V{"2 a", "4 b", "8 c try", "12 d", "14 e"}));
}

TEST(ValidateImportScanner, StatementsAndRelativeLevels) {
  using V = std::vector<std::string>;
  EXPECT_EQ(imports_of("import a.b as c, d\n"), (V{"1 a.b", "1 d"}));
  EXPECT_EQ(imports_of("from a.b import x\nfrom . import y\nfrom .mod import z as w\n"),
            (V{"1 a.b [x]", "2 pkg.sub [y]", "3 pkg.sub.mod [z]"}));
  EXPECT_EQ(imports_of("from ..pkg import (x,\n y,  # comment\n)\nimport q\n"),
            (V{"1 pkg.pkg [x,y]", "4 q"}));
  EXPECT_EQ(imports_of("from ... import x\n"), (V{"1 ? [x]"}));
  EXPECT_EQ(imports_of("from . import x\n", ""), (V{"1 ? [x]"}));
  EXPECT_EQ(imports_of("from .a import *\nimport a; import b\nx = 1; from c import d\n"),
            (V{"1 pkg.sub.a [*]", "2 a", "2 b", "3 c [d]"}));
  EXPECT_EQ(imports_of("from \\\n  x import \\\n  y\nimport z\n"), (V{"1 x [y]", "4 z"}));
  // Not imports: identifiers that start with the words, expressions, yield from.
  EXPECT_EQ(imports_of("important = 1\nfromage = 2\ny = yield from g()\nimport\nfrom x\n"), V{});
}

TEST(ValidateImportScanner, StringsCommentsAndLineEnds) {
  using V = std::vector<std::string>;
  EXPECT_EQ(imports_of("\"\"\"Docs.\nimport nothing\nfrom x import y\n\"\"\"\nimport real\n"),
            (V{"5 real"}));
  EXPECT_EQ(imports_of("x = '''\nimport a\n''' ; import b\n"), (V{"1 b"}));
  EXPECT_EQ(imports_of("s = 'import a'  # import b\nt = \"from c import d\"\n"), V{});
  EXPECT_EQ(imports_of("s = r'\\'' ; import a\nu = '\\\\'\nimport b\n"), (V{"1 a", "3 b"}));
  EXPECT_EQ(imports_of("# import a\nimport b\r\nimport c\rimport d\r\n"), (V{"2 b", "3 c", "4 d"}));
  EXPECT_EQ(imports_of("from . import (a,\r\n  b)\r\nimport c\r\n"), (V{"1 pkg.sub [a,b]", "3 c"}));
  // An unterminated string ends at its line; an unterminated docstring at the end of the text.
  EXPECT_EQ(imports_of("s = 'oops\nimport a\n\"\"\"\nimport b\n"), (V{"2 a"}));
}

TEST(ValidateImportScanner, TryAndTypeCheckingBlocks) {
  using V = std::vector<std::string>;
  EXPECT_EQ(imports_of("try:\n    import a\n    if x:\n        import b\nexcept ImportError:\n"
                       "    import c\nelse:\n    import d\nimport e\n"),
            (V{"2 a try", "4 b try", "6 c", "8 d", "9 e"}));
  EXPECT_EQ(imports_of("if TYPE_CHECKING:\n    from a import B\nelse:\n    import c\n"
                       "if typing.TYPE_CHECKING: import d\ntry: import e\nexcept: pass\n"),
            (V{"2 a [B] tc", "4 c", "5 d tc", "6 e try"}));
  EXPECT_EQ(imports_of("def f():\n\ttry:\n\t\timport a\n\texcept Exception:\n\t\tpass\n"
                       "\timport b\n"),
            (V{"3 a try", "6 b"}));
  // A try whose body is only a comment and a docstring.
  EXPECT_EQ(imports_of("try:\n    # c\n    '''doc\nimport x'''\n    import a\nfinally:\n  pass\n"),
            (V{"5 a try"}));
}

TEST(ValidateImportScanner, LargeAndHostileTextsStayBounded) {
  // Deep nesting, long lines, many imports, unbalanced brackets: linear, no recursion.
  std::string deep;
  for (int i = 0; i < 3000; ++i) deep += std::string(i, ' ') + "try:\n";
  deep += std::string(3000, ' ') + "import a\n";
  auto d = scan_imports(deep, "");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d[0].guarded);
  std::string many;
  for (int i = 0; i < 200000; ++i) many += "import m\n";
  EXPECT_EQ(scan_imports(many, "", 1000).size(), 1000u);
  std::string brackets = "from . import (" + std::string(4 << 20, '(') + "\nimport x\n";
  EXPECT_LE(scan_imports(brackets, "p").size(), 1u);
  std::string quotes(8 << 20, '\'');
  EXPECT_TRUE(scan_imports(quotes, "p").empty());
  std::string backslashes(8 << 20, '\\');
  EXPECT_TRUE(scan_imports(backslashes, "p").empty());
}

TEST(ValidateMatchers, AgreeWithTheRegularExpressionsTheyReplaced) {
  const std::regex header(R"(^[A-Za-z0-9][A-Za-z0-9-]*:( .*|)$)");
  for (std::string s :
       {"Name: x", "Name:", "Name: ", "Name:x", "Name :x", "-Name: x", "9-a: x", "N_a: x",
        "Name: x\ry", "Name: x\t", "Name: \x01", "Name", ": x", "", "Requires-Dist: a; b",
        "Name:  x", "Name:\tx", "N\xc3\xa4: x", "Name: \xc3\xa4"})
    EXPECT_EQ(is_metadata_header_line(s), std::regex_match(s, header)) << "'" << s << "'";
  const std::regex mv(R"(^(1\.[012]|2\.[1-6])$)");  // packaging 26.4's list
  for (std::string s : {"1.0", "1.1", "1.2", "1.3", "2.0", "2.1", "2.4", "2.5", "2.6", "2.10", "2.",
                        "2", "2.x", "3.0", "1.0 ", "", "2.1.1", "12.1"})
    EXPECT_EQ(is_known_metadata_version(s), std::regex_match(s, mv)) << "'" << s << "'";
  const std::regex local(R"(^[a-z0-9]+(\.[a-z0-9]+)*$)");
  for (std::string s :
       {"cu130torch2.11", "a", "a.b", "a..b", ".a", "a.", "", "A", "a-b", "a_b", "1.2.3", "a b"})
    EXPECT_EQ(is_normalized_local_label(s), std::regex_match(s, local)) << "'" << s << "'";

  const std::regex pep600(R"(^manylinux_2_([0-9]+)_([a-z0-9_]+)$)"),
      legacy(R"(^manylinux(1|2010|2014)_([a-z0-9_]+)$)");
  for (std::string s : {"manylinux_2_28_x86_64",
                        "manylinux_2_5_i686",
                        "manylinux_2__x86_64",
                        "manylinux_2_28_",
                        "manylinux_2_28",
                        "manylinux_2_28x86_64",
                        "manylinux_2_28_X86",
                        "manylinux_3_28_x86_64",
                        "manylinux1_x86_64",
                        "manylinux2010_x86_64",
                        "manylinux2014_aarch64",
                        "manylinux2015_x86_64",
                        "manylinux12010_x86_64",
                        "manylinux1_",
                        "manylinux_1_x86_64",
                        "musllinux_1_2_x86_64",
                        "linux_x86_64",
                        "any",
                        "",
                        "manylinux_2_28_x86_64 ",
                        "manylinux_2_017_x86_64",
                        "manylinux2014_x86_64_v2",
                        "manylinux_2_28_x86-64"}) {
    std::smatch m;
    int want = -1;
    std::string want_arch = "unset", arch = "unset";
    if (std::regex_match(s, m, pep600))
      want = std::stoi(m[1].str()), want_arch = m[2];
    else if (std::regex_match(s, m, legacy))
      want = m[1] == "1" ? 5 : m[1] == "2010" ? 12 : 17, want_arch = m[2];
    EXPECT_EQ(manylinux_minor(s, arch), want) << "'" << s << "'";
    EXPECT_EQ(arch, want_arch) << "'" << s << "'";
  }
  std::string arch;
  EXPECT_EQ(manylinux_minor("manylinux_2_99999999999999999999_x86_64", arch),
            INT_MAX);  // std::stoi threw

  const std::regex cpython(R"(^.+\.cpython-3([0-9]+)(t?)-([a-z0-9_]+)-linux-gnu\.so$)"),
      abi3(R"(^.+\.abi3\.so$)");
  for (std::string s : {"ext.cpython-311-x86_64-linux-gnu.so",
                        "ext.cpython-313t-x86_64-linux-gnu.so",
                        ".cpython-311-x86_64-linux-gnu.so",
                        "a.cpython-3-x86_64-linux-gnu.so",
                        "a.cpython-311t-linux-gnu.so",
                        "a.cpython-311-x86_64-linux-gnu.sox",
                        "a.cpython-311-X86-linux-gnu.so",
                        "a.cpython-311-x86-64-linux-gnu.so",
                        "a.cpython-311-x86_64-linux-musl.so",
                        "a.cpython-311.cpython-312-x86_64-linux-gnu.so",
                        "a.cpython-312-x.cpython-311-x86_64-linux-gnu.so",
                        "a\nb.cpython-311-x86_64-linux-gnu.so",
                        "a\rb.cpython-311-x86_64-linux-gnu.so",
                        "\x01.cpython-311-x86_64-linux-gnu.so",
                        "a.cpython-311tt-x86_64-linux-gnu.so",
                        "a.cpython-2711-x86_64-linux-gnu.so",
                        "a.cpython-311-x86_64-linux-gnu.so.1",
                        "a.so",
                        "a.abi3.so",
                        ".abi3.so",
                        "a\n.abi3.so",
                        "a.abi3.so.1",
                        "abi3.so",
                        "a.ABI3.so",
                        ""}) {
    std::smatch m;
    auto got = cpython_suffix(s);
    bool want = std::regex_match(s, m, cpython);
    ASSERT_EQ(got.has_value(), want) << "'" << s << "'";
    if (want) {
      EXPECT_EQ(got->minor, m[1].str());
      EXPECT_EQ(got->free_threaded, m[2] == "t");
      EXPECT_EQ(got->arch, m[3].str());
    }
    EXPECT_EQ(is_abi3_module(s), std::regex_match(s, abi3)) << "'" << s << "'";
  }

  const std::regex cuda(
      R"(^lib(cudart|cublas|cublasLt|cufft|cufftw|curand|cusolver|cusparse|cusparseLt|nvrtc|nvrtc-builtins|nvJitLink|nvToolsExt|cupti|nccl|cudnn|cufile|nvshmem_host|cuda)\.so(\.[0-9]+)*$)");
  for (std::string s :
       {"libcudart.so.13", "libcudart.so", "libcudart.so.", "libcudart.so.13.0.1",
        "libcudart.so.1a", "libcublasLt.so.13", "libcublasL.so.13", "libnvrtc-builtins.so.13.0",
        "libcuda.so.1", "libcudax.so", "libc.so.6", "cudart.so", "libcudart.sox", "libcudart.so..1",
        "libnvshmem_host.so.3", "libcudart", "lib.so", ""})
    EXPECT_EQ(is_cuda_library(s), std::regex_match(s, cuda)) << "'" << s << "'";
  const std::regex cudart(R"(^libcudart\.so\.([0-9]+)$)");
  for (std::string s : {"libcudart.so.13", "libcudart.so.013", "libcudart.so.", "libcudart.so.13.0",
                        "libcudart.so", "libcudart.so.1x", "libcudart.so.99999999999999999999"}) {
    std::smatch m;
    EXPECT_EQ(std::string(cudart_major(s)), std::regex_match(s, m, cudart) ? m[1].str() : "")
        << "'" << s << "'";
  }

  const std::string mb(1 << 20, 'a');
  EXPECT_TRUE(is_metadata_header_line("Summary: " + mb));
  EXPECT_FALSE(is_metadata_header_line(mb));
  EXPECT_FALSE(is_known_metadata_version("2." + mb));
  EXPECT_TRUE(is_normalized_local_label(mb + "." + mb));
  EXPECT_EQ(manylinux_minor("manylinux_2_28_" + mb, arch), 28);
  EXPECT_EQ(manylinux_minor("manylinux_2_" + std::string(1 << 20, '9') + "_x86_64", arch), INT_MAX);
  EXPECT_TRUE(cpython_suffix(mb + ".cpython-311-" + std::string(1 << 20, '_') + "-linux-gnu.so"));
  EXPECT_TRUE(is_abi3_module(mb + ".abi3.so"));
  EXPECT_FALSE(is_cuda_library("libcudart.so" + std::string(1 << 20, '.')));
  EXPECT_EQ(cudart_major("libcudart.so." + std::string(1 << 20, '1')).size(), std::size_t{1} << 20);
}

}  // namespace
}  // namespace kiln::validate
