// Inside validate/: the wheel as the checks see it (read once), and one function per check, each in
// its own file.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "archive/zip_reader.h"
#include "elf/elf.h"
#include "manifest/target.h"
#include "validate/validate.h"
#include "wheel/metadata.h"

namespace kiln::validate {

struct Member {
  std::string name;
  std::uint64_t size = 0;   // bytes read back
  std::string record_hash;  // "sha256=<urlsafe b64>" of the bytes read back
  std::string error;        // why it could not be read ("" when it could)
};

struct Binary {
  std::string path;  // inside the wheel
  std::string data;
  elf::ElfInfo info;
  bool extension = false;  // a Python extension module (exports PyInit_*)
};

struct LoadedWheel {
  std::filesystem::path path;
  std::string filename;
  packaging::WheelFileName name;
  std::optional<archive::ZipReader> zip;  // absent when the archive is unreadable or installed
  bool installed = false;  // an installed distribution's files (validate_installed), no archive
  bool readable() const { return zip.has_value() || installed; }
  std::string zip_error;
  std::vector<Member> members;  // every file entry (not directories), in archive order
  std::string dist_info;        // "<dir>.dist-info" as found in the archive ("" when none)
  std::map<std::string, std::string> texts;     // dist-info METADATA, WHEEL, RECORD, kiln.json
  std::optional<wheel::Provenance> provenance;  // kiln.json, when the wheel has one that reads
  std::string provenance_error;                 // why its kiln.json does not read ("" if it does)
  std::vector<Binary> binaries;                 // every ELF file in the wheel
  std::vector<std::string> elf_errors;          // ELF files libelf could not read
  // The *.py files' texts for the "imports" check, up to kMaxPythonFileBytes each and
  // kMaxPythonBytes in all; the names of those left out (too large, or past the total).
  std::map<std::string, std::string> python_files;
  std::vector<std::string> python_skipped;
};

inline constexpr std::uint64_t kMaxPythonFileBytes = 16u << 20;
inline constexpr std::uint64_t kMaxPythonBytes = 256u << 20;

// Reads the archive once: hashes every entry, keeps the dist-info texts and the ELF files.
Expected<LoadedWheel> load_wheel(const std::filesystem::path& path);
// The same from a wheel's bytes in memory (fuzzing, tests); `filename` stands for its file name.
Expected<LoadedWheel> load_wheel_image(std::string image, const std::string& filename);

CheckResult check_archive(const LoadedWheel& wheel);
CheckResult check_metadata(const LoadedWheel& wheel, const Options& options);
CheckResult check_tags(const LoadedWheel& wheel);
CheckResult check_elf(const LoadedWheel& wheel);
CheckResult check_torch_abi(const LoadedWheel& wheel, const Options& options);
// "gpu-code", and "gpu-target" when options.gpu is set.
std::vector<CheckResult> check_gpu_code(const LoadedWheel& wheel, const Options& options);
// "imports": the modules the wheel's Python files import from its own packages are in it, and
// every extension module exports PyInit_<its name>. Static: nothing is run.
CheckResult check_imports(const LoadedWheel& wheel);
// Only when options.import_with is set.
CheckResult check_import(const LoadedWheel& wheel, const Options& options);

// A result helper: the verdict is the worst of what was added; each line at most 1 KiB (a longer
// one is cut, its size said).
class Findings {
 public:
  explicit Findings(std::string id) { result_.id = std::move(id); }
  void fail(std::string line) { add(Verdict::Fail, std::move(line)); }
  void warn(std::string line) { add(Verdict::Warn, std::move(line)); }
  void note(std::string line);
  nlohmann::json& data() { return result_.data; }
  bool failed() const { return verdict_ == Verdict::Fail; }
  // The message is the first failure (or warning) with a count of the others, else `ok_message`.
  CheckResult finish(const std::string& ok_message);

 private:
  void add(Verdict v, std::string line);
  CheckResult result_;
  Verdict verdict_ = Verdict::Pass;
  std::vector<std::string> fails_, warns_;
};

CheckResult skipped(std::string id, std::string why);

// kiln's own rules for the wheels it builds, beyond what the standards ask of a wheel (Requires-
// Python present; every module imported from the wheel's own packages in it; every extension
// exporting PyInit_<its name>): a failure for a wheel with a kiln.json, a warning for anyone
// else's, which installers take as they are.
bool is_kiln_wheel(const LoadedWheel& w);
void policy(const LoadedWheel& w, Findings& f, const std::string& line);

// The checks' matchers of names and header lines (each in its check's file; declared for tests).
// metadata: a "Name: value" header line (ASCII name, then ":" and nothing or " " and a value
// without CR or LF); a Metadata-Version kiln knows (1.0, 1.1, 1.2, 2.N); a normalised local
// version label ([a-z0-9]+ parts joined by dots).
bool is_metadata_header_line(std::string_view line);
bool is_known_metadata_version(std::string_view version);  // 1.0-1.2, 2.1-2.6
bool is_normalized_local_label(std::string_view label);
// tags: the glibc minor of a manylinux platform tag (manifest::manylinux_minor).
using manifest::manylinux_minor;
// tags: an extension module's name NAME.cpython-3<minor>[t]-<arch>-linux-gnu.so.
struct CpythonSuffix {
  std::string minor;  // "11" of cpython-311
  bool free_threaded = false;
  std::string arch;
};
std::optional<CpythonSuffix> cpython_suffix(std::string_view file_name);
bool is_abi3_module(std::string_view file_name);  // NAME.abi3.so
// elf: lib<a CUDA library>.so[.N]...
bool is_cuda_library(std::string_view soname);
// elf: the libraries a wheel may need from the system (library_policy.cpp): what auditwheel's
// policy allows for every one of its platform tags (manylinux_2_17: libz.so.1, libexpat.so.1, …;
// musllinux: libc.so, libz.so.1), and the program interpreter.
std::set<std::string> allowed_system_libraries(const packaging::WheelFileName& name);
// imports: the import statements of a Python file's text, found without running it (strings and
// comments skipped, logical lines joined, blocks by indentation). `package` is the file's package
// ("pkg.sub" for pkg/sub/mod.py and pkg/sub/__init__.py; "" at the top level): relative imports
// are resolved against it. At most `max_imports` are returned.
struct PyImport {
  int line = 0;                    // 1-based, where the statement starts
  std::string module;              // absolute ("" when a relative import climbs above the top)
  std::string written;             // as written: ".x", "a.b"
  bool from = false;               // from MODULE import NAMES
  int level = 0;                   // leading dots of a relative import
  std::vector<std::string> names;  // from-import names ("*" for a star import)
  bool guarded = false;            // inside a try: block
  bool type_checking = false;      // under if TYPE_CHECKING:
  bool platform = false;           // under an if (elif, else) on the platform: if WINDOWS:
};
std::vector<PyImport> scan_imports(std::string_view text, std::string_view package,
                                   std::size_t max_imports = 100000);
// archive: RECORD's rows as pip reads them (CPython's csv reader over splitlines()), each with the
// 1-based line it starts on.
std::vector<std::pair<std::size_t, std::vector<std::string>>> parse_record(std::string_view text);
// gpu-code: the CUDA release that introduced a PTX ISA version, times ten (9.0 -> 130 for
// CUDA 13.0, 8.7 -> 128); a driver JIT-compiles PTX up to its own CUDA version. 0 for an invalid
// version.
int ptx_isa_cuda(int major, int minor);
// torch-abi: the N of libcudart.so.N ("" when `soname` is not one).
std::string_view cudart_major(std::string_view soname);

}  // namespace kiln::validate
