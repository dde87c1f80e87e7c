#include "archive/deb.h"
#include "archive/libarchive_reader.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "core/fs.h"
#include "core/strings.h"

namespace kiln::archive {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kMaxDebianBinary = 64;

// A member name fit for a one-line message: bytes outside printable ASCII become '?', cut at 100.
std::string shown(std::string_view name) {
  std::string out;
  for (unsigned char c : name.substr(0, 100)) out += (c < 0x20 || c >= 0x7f) ? '?' : char(c);
  if (name.size() > 100) out += cat("...(", name.size(), " bytes)");
  return out;
}

class DebReader {
 public:
  DebReader(std::string name, struct archive* a, const DebLimits& limits)
      : name_(std::move(name)), a_(a), limits_(limits) {}

  // Reads every member; the data member is written to `dir`/<its name>, whose path is returned.
  Expected<fs::path> run(const fs::path& dir);

 private:
  Error bad(std::string_view what) const {
    return Error::bad_input(cat("package ", name_, ": ", what));
  }
  Error lib_error(std::string_view member) const {
    const char* text = archive_error_string(a_);
    std::string why = text ? shown(text) : "truncated or corrupt data";
    if (member.empty()) return bad(cat("not a readable ar archive: ", why));
    return bad(cat("member '", shown(member), "': ", why));
  }
  Expected<void> debian_binary(std::uint64_t size);
  Expected<fs::path> copy_data(const std::string& member, std::uint64_t size, const fs::path& dir);

  std::string name_;
  struct archive* a_;
  const DebLimits& limits_;
};

Expected<void> DebReader::debian_binary(std::uint64_t size) {
  if (size > kMaxDebianBinary)
    return bad(
        cat("member 'debian-binary' holds ", size, " bytes (at most ", kMaxDebianBinary, ")"));
  char buf[kMaxDebianBinary + 1] = {};
  la_ssize_t n = archive_read_data(a_, buf, kMaxDebianBinary);
  if (n < 0) return lib_error("debian-binary");
  if (static_cast<std::uint64_t>(n) != size) return bad("member 'debian-binary' is truncated");
  std::string_view text(buf, static_cast<std::size_t>(n));
  if (!text.starts_with("2.") || !text.ends_with('\n'))
    return bad(cat("member 'debian-binary' says '", shown(trim(text)),
                   "', not a format 2.x Debian package"));
  return {};
}

Expected<fs::path> DebReader::copy_data(const std::string& member, std::uint64_t size,
                                        const fs::path& dir) {
  if (size > limits_.max_data_bytes)
    return bad(cat("member '", member, "' declares ", size, " bytes, over the ",
                   limits_.max_data_bytes, "-byte limit"));
  fs::path path = dir / member;
  UniqueFd out(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (out.get() < 0)
    return Error::failed(cat("cannot create ", path.string(), ": ", std::strerror(errno)));
  std::vector<char> buf(kReadBlock);
  std::uint64_t written = 0;
  for (;;) {
    la_ssize_t n = archive_read_data(a_, buf.data(), buf.size());
    if (n < 0) return lib_error(member);
    if (n == 0) break;
    written += static_cast<std::uint64_t>(n);
    if (written > size)
      return bad(cat("member '", member, "' holds more than its ", size, " bytes"));
    for (const char* p = buf.data(); n > 0;) {
      ssize_t w = ::write(out.get(), p, static_cast<std::size_t>(n));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        return Error::failed(cat("cannot write ", path.string(), ": ", std::strerror(errno)));
      p += w;
      n -= w;
    }
  }
  if (written != size)
    return bad(cat("member '", member, "' is truncated (", written, " of ", size, " bytes)"));
  if (::close(out.release()) != 0)
    return Error::failed(cat("cannot write ", path.string(), ": ", std::strerror(errno)));
  return path;
}

Expected<fs::path> DebReader::run(const fs::path& dir) {
  fs::path data;
  for (std::size_t index = 0;; ++index) {
    struct archive_entry* e = nullptr;
    int r = archive_read_next_header(a_, &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK) return lib_error({});
    if ((archive_format(a_) & ARCHIVE_FORMAT_BASE_MASK) != ARCHIVE_FORMAT_AR)
      return bad("not an ar archive");
    const char* raw = archive_entry_pathname(e);
    std::string member = raw ? raw : "";
    if (!is_deb_member(index, member))
      return bad(cat("unexpected member '", shown(member), "' at position ", index + 1,
                     " (a .deb holds debian-binary, control.tar[.gz|.xz|.zst] and "
                     "data.tar[.gz|.xz|.zst|.bz2], in that order)"));
    if (archive_entry_filetype(e) != AE_IFREG)
      return bad(cat("member '", member, "' is not a regular file"));
    if (!archive_entry_size_is_set(e) || archive_entry_size(e) < 0)
      return bad(cat("member '", member, "' has no size"));
    auto size = static_cast<std::uint64_t>(archive_entry_size(e));
    if (index == 0) {
      KILN_CHECK(debian_binary(size));
    } else if (index == 1) {
      if (size > limits_.max_control_bytes)
        return bad(cat("member '", member, "' declares ", size, " bytes, over the ",
                       limits_.max_control_bytes, "-byte limit"));
      if (archive_read_data_skip(a_) != ARCHIVE_OK) return lib_error(member);
    } else {
      KILN_TRY(data, copy_data(member, size, dir));
    }
  }
  if (data.empty()) return bad("has no data.tar member (not a whole Debian package)");
  return data;
}

}  // namespace

bool is_deb_member(std::size_t index, std::string_view name) {
  switch (index) {
    case 0:
      return name == "debian-binary";
    case 1:
      return name == "control.tar" || name == "control.tar.gz" || name == "control.tar.xz" ||
             name == "control.tar.zst";
    case 2:
      return name == "data.tar" || name == "data.tar.gz" || name == "data.tar.xz" ||
             name == "data.tar.zst" || name == "data.tar.bz2";
    default:
      return false;
  }
}

Expected<UnpackResult> unpack_deb(const fs::path& deb, const fs::path& dest_arg,
                                  const UnpackOptions& options, const DebLimits& limits) {
  fs::path dest = dest_arg.has_filename() ? dest_arg : dest_arg.parent_path();
  std::string name = deb.filename().string();
  UniqueFd input(::open(deb.c_str(), O_RDONLY | O_CLOEXEC));
  if (input.get() < 0)
    return Error::failed(cat("cannot open package ", deb.string(), ": ", std::strerror(errno)));
  struct stat st;
  if (::fstat(input.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return Error::failed(cat("cannot read ", deb.string(), ": not a regular file"));
  ArchivePtr a(archive_read_new());
  if (!a) return Error::failed("cannot allocate a libarchive reader");
  // ar alone, and no filter: a .deb's outer archive is never compressed.
  if (archive_read_support_format_ar(a.get()) != ARCHIVE_OK)
    return Error::failed("libarchive lacks built-in ar support");
  fs::path parent = dest.parent_path().empty() ? fs::path(".") : dest.parent_path();
  KILN_CHECK(ensure_directory(parent));
  KILN_TRY(TempDir temp, TempDir::create(parent, cat(".", dest.filename().string(), ".deb-")));
  DebReader reader(name, a.get(), limits);
  if (archive_read_open_fd(a.get(), input.get(), kReadBlock) != ARCHIVE_OK) {
    const char* text = archive_error_string(a.get());
    return Error::bad_input(
        cat("package ", name, ": not a Debian package (", text ? shown(text) : "unreadable", ")"));
  }
  KILN_TRY(fs::path data, reader.run(temp.path()));
  a.reset();
  auto result = unpack(data, dest, options);
  if (!result)
    return Error{result.error().kind, cat("package ", name, ": ", result.error().message),
                 result.error().detail};
  return result;
}

}  // namespace kiln::archive
