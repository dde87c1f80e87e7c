#include "archive/unpack.h"
#include "archive/libarchive_reader.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <locale.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <utility>

#include "archive/stream_check.h"
#include "archive/zip_reader.h"
#include "core/fault.h"
#include "core/fs.h"
#include "core/strings.h"

namespace kiln::archive {

namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxNameBytes = 4000;      // a relative path that stays below PATH_MAX
constexpr std::size_t kMaxComponentBytes = 255;  // NAME_MAX
constexpr int kMaxSymlinkHops = 40;              // the kernel's MAXSYMLINKS
constexpr std::size_t kMaxResolveSteps = 4096;   // components walked to resolve one symlink

std::string errno_text(int err) {
  return std::strerror(err);
}

// A name fit for a one-line message: control bytes become \xNN, long names are cut.
std::string printable(std::string_view name) {
  constexpr std::size_t kShown = 200;
  std::string out;
  if (name.size() > kShown + 20)
    return cat(printable(name.substr(0, kShown)), "...(", name.size(), " bytes)");
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string octal(unsigned value) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", value);
  return buf;
}

using Fd = UniqueFd;

// libarchive converts member names to the current locale's charset; in the C locale a non-ASCII
// zip name (UTF-8 flag) cannot be converted and comes back as no name at all. Names are bytes to
// kiln, so libarchive runs under a UTF-8 LC_CTYPE for this thread only (uselocale).
class Utf8Ctype {
 public:
  Utf8Ctype() : locale_(::newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0))) {
    if (locale_ != static_cast<locale_t>(0)) previous_ = ::uselocale(locale_);
  }
  ~Utf8Ctype() {
    if (locale_ == static_cast<locale_t>(0)) return;
    ::uselocale(previous_);
    ::freelocale(locale_);
  }
  Utf8Ctype(const Utf8Ctype&) = delete;
  Utf8Ctype& operator=(const Utf8Ctype&) = delete;

 private:
  locale_t locale_;
  locale_t previous_ = static_cast<locale_t>(0);
};

// Splits a member path into components, dropping "" and "."; a non-empty return is the problem.
std::string split_member(std::string_view name, std::vector<std::string>& parts) {
  parts.clear();
  if (name.empty()) return "has an empty name";
  if (name.size() > kMaxNameBytes) return cat("has a name longer than ", kMaxNameBytes, " bytes");
  if (name.front() == '/') return "is an absolute path";
  // Such names would reach RECORD, whose rows installers split at every line break.
  if (std::string c = control_character(name); !c.empty())
    return cat("has a control character (", c, ") in its name");
  for (auto& part : split(name, "/")) {
    if (part == ".") continue;
    if (part == "..") return "escapes the destination ('..' component)";
    if (part.size() > kMaxComponentBytes)
      return cat("has a path component longer than ", kMaxComponentBytes, " bytes");
    parts.push_back(std::move(part));
  }
  return {};
}

// Whether a symlink target, read as text from the link's directory at `depth`, stays inside.
bool lexically_inside(std::string_view target, std::size_t depth) {
  for (const auto& part : split(target, "/")) {
    if (part == ".") continue;
    if (part == "..") {
      if (depth == 0) return false;
      --depth;
    } else {
      ++depth;
    }
  }
  return true;
}

enum class Kind { Dir, File, Symlink };

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::Dir:
      return "a directory";
    case Kind::File:
      return "a file";
    case Kind::Symlink:
      return "a symlink";
  }
  return "?";
}

// What has been created in the temporary tree: the ground truth for every path check, so the
// filesystem is never asked to follow a link.
struct Node {
  Kind kind = Kind::Dir;
  std::size_t parent = 0;
  std::string name;
  std::map<std::string, std::size_t, std::less<>> children;
  std::string target;  // symlinks
};

class Unpacker {
 public:
  Unpacker(std::string archive_name, const UnpackOptions& options, int root_fd)
      : archive_name_(std::move(archive_name)), options_(options), root_fd_(root_fd) {
    nodes_.push_back(Node{});
  }

  Expected<void> check_format(struct archive* a) const;
  Error open_error(struct archive* a) const;
  Expected<UnpackResult> run(struct archive* a);

 private:
  Error bad(std::string_view member, std::string_view what) const {
    return Error::bad_input(
        cat("archive ", archive_name_, ": member '", printable(member), "' ", what));
  }
  Error lib_error(struct archive* a, std::string_view member) const;
  Error sys_error(std::string_view member, std::string_view what, int err) const {
    return Error::failed(cat("archive ", archive_name_, ": cannot ", what, " member '",
                             printable(member), "': ", errno_text(err)));
  }

  Expected<void> entry(struct archive* a, struct archive_entry* e);
  bool skipped(struct archive_entry* e, const std::vector<std::string>& parts) const;
  Expected<std::size_t> add_node(std::size_t parent, const std::string& name, Kind kind,
                                 std::string_view member);
  std::size_t child(std::size_t node, std::string_view name) const;
  std::string path_of(std::size_t node) const;
  Expected<Fd> open_parent(const std::vector<std::string>& parts, std::string_view member,
                           std::size_t& parent_node);
  Expected<void> make_dir(const std::vector<std::string>& parts, std::string_view member);
  Expected<void> claim_file(int dir, std::size_t parent, const std::string& leaf,
                            std::string_view member);
  Expected<void> make_file(struct archive* a, const std::vector<std::string>& parts,
                           std::string_view member, struct archive_entry* e);
  Expected<void> make_symlink(const std::vector<std::string>& parts, std::string_view member,
                              const std::string& target);
  Expected<void> make_hardlink(const std::vector<std::string>& parts, std::string_view member,
                               const std::vector<std::string>& target_parts,
                               std::string_view target);
  std::string escapes(std::size_t link) const;
  Expected<void> settle(std::size_t node, std::string& path, const timespec* times);
  Expected<void> finalize();

  std::string archive_name_;
  const UnpackOptions& options_;
  int root_fd_;
  std::vector<Node> nodes_;  // nodes_[0]: the root
  std::vector<std::size_t> symlinks_;
  std::uint64_t seen_ = 0;
  std::string last_member_;
  UnpackResult result_;
};

Error Unpacker::lib_error(struct archive* a, std::string_view member) const {
  const char* text = archive_error_string(a);
  std::string message = text ? text : "truncated or corrupt data";
  std::string where = member.empty() ? std::string() : cat(" (member '", printable(member), "')");
  if (!last_member_.empty() && member.empty())
    where = cat(" (after member '", printable(last_member_), "')");
  int err = archive_errno(a);
  std::string line = cat("archive ", archive_name_, ": ", printable(message), where);
  if (err == EIO || err == ENOMEM || err == ENOSPC) return Error::failed(line);
  return Error::bad_input(line);
}

constexpr const char* kExpected = "expected tar, tar.gz, tar.bz2, tar.xz, tar.zst or zip";

Error Unpacker::open_error(struct archive* a) const {
  // Only tar and zip are enabled, so libarchive recognising no format means "not tar or zip".
  const char* text = archive_error_string(a);
  if ((archive_format(a) & ARCHIVE_FORMAT_BASE_MASK) == 0 &&
      (text == nullptr || std::string_view(text) == "Unrecognized archive format"))
    return Error::bad_input(
        cat("archive ", archive_name_, ": unsupported archive format (", kExpected, ")"));
  return lib_error(a, {});
}

Expected<void> Unpacker::check_format(struct archive* a) const {
  int format = archive_format(a) & ARCHIVE_FORMAT_BASE_MASK;
  std::string expected = kExpected;
  if (format != ARCHIVE_FORMAT_TAR && format != ARCHIVE_FORMAT_ZIP)
    return Error::bad_input(
        cat("archive ", archive_name_, ": unsupported archive format (", expected, ")"));
  int compressions = 0;
  for (int i = 0; i < archive_filter_count(a); ++i) {
    int code = archive_filter_code(a, i);
    if (code == ARCHIVE_FILTER_NONE) continue;
    if (code != ARCHIVE_FILTER_GZIP && code != ARCHIVE_FILTER_BZIP2 && code != ARCHIVE_FILTER_XZ &&
        code != ARCHIVE_FILTER_ZSTD)
      return Error::bad_input(cat("archive ", archive_name_, ": unsupported compression '",
                                  archive_filter_name(a, i), "' (", expected, ")"));
    ++compressions;
  }
  if (compressions > 1 || (format == ARCHIVE_FORMAT_ZIP && compressions > 0))
    return Error::bad_input(
        cat("archive ", archive_name_, ": unsupported archive format (",
            format == ARCHIVE_FORMAT_ZIP ? "a compressed zip" : "compressed twice", "; ", expected,
            ")"));
  return {};
}

Expected<std::size_t> Unpacker::add_node(std::size_t parent, const std::string& name, Kind kind,
                                         std::string_view member) {
  if (nodes_.size() - 1 >= options_.limits.max_entries)
    return bad(member, cat("takes the archive past the limit of ", options_.limits.max_entries,
                           " entries"));
  std::size_t id = nodes_.size();
  Node node;
  node.kind = kind;
  node.parent = parent;
  node.name = name;
  nodes_.push_back(std::move(node));
  nodes_[parent].children.emplace(name, id);
  return id;
}

std::size_t Unpacker::child(std::size_t node, std::string_view name) const {
  const auto& children = nodes_[node].children;
  auto it = children.find(name);
  return it == children.end() ? 0 : it->second;
}

std::string Unpacker::path_of(std::size_t node) const {
  std::vector<const std::string*> names;
  for (; node != 0; node = nodes_[node].parent) names.push_back(&nodes_[node].name);
  std::string path;
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    if (!path.empty()) path += '/';
    path += **it;
  }
  return path;
}

// Opens the directory that will hold the member, creating missing directories on the way. Every
// component is checked against the tree first and opened with O_NOFOLLOW, one at a time.
Expected<Fd> Unpacker::open_parent(const std::vector<std::string>& parts, std::string_view member,
                                   std::size_t& parent_node) {
  Fd dir(::dup(root_fd_));
  if (dir.get() < 0) return sys_error(member, "open the directory of", errno);
  std::size_t node = 0;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string& name = parts[i];
    std::size_t next = child(node, name);
    if (next == 0) {
      if (::mkdirat(dir.get(), name.c_str(), 0700) != 0)
        return sys_error(member, "create the directory of", errno);
      KILN_TRY(next, add_node(node, name, Kind::Dir, member));
    } else if (nodes_[next].kind == Kind::Symlink) {
      return bad(member, cat("passes through symlink '", printable(path_of(next)), "'"));
    } else if (nodes_[next].kind == Kind::File) {
      return bad(member, cat("passes through '", printable(path_of(next)),
                             "', which an earlier member made a file"));
    }
    Fd sub(::openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (sub.get() < 0) return sys_error(member, "open the directory of", errno);
    dir = std::move(sub);
    node = next;
  }
  parent_node = node;
  return dir;
}

Expected<void> Unpacker::make_dir(const std::vector<std::string>& parts, std::string_view member) {
  std::size_t parent = 0;
  KILN_TRY(Fd dir, open_parent(parts, member, parent));
  const std::string& leaf = parts.back();
  if (std::size_t existing = child(parent, leaf)) {
    if (nodes_[existing].kind == Kind::Dir) return {};
    return bad(member, cat("is a directory but an earlier member made it ",
                           kind_name(nodes_[existing].kind)));
  }
  if (::mkdirat(dir.get(), leaf.c_str(), 0700) != 0) return sys_error(member, "create", errno);
  KILN_CHECK(add_node(parent, leaf, Kind::Dir, member));
  return {};
}

// Makes way for a file member `leaf` in `dir`, node `parent`'s directory: a duplicate file replaces
// the earlier one (unlinked first, which leaves hardlinks to it intact); anything else an earlier
// member made there is an error.
Expected<void> Unpacker::claim_file(int dir, std::size_t parent, const std::string& leaf,
                                    std::string_view member) {
  std::size_t existing = child(parent, leaf);
  if (!existing) {
    KILN_CHECK(add_node(parent, leaf, Kind::File, member));
    return {};
  }
  if (nodes_[existing].kind != Kind::File)
    return bad(member,
               cat("is a file but an earlier member made it ", kind_name(nodes_[existing].kind)));
  if (::unlinkat(dir, leaf.c_str(), 0) != 0) return sys_error(member, "replace", errno);
  return {};
}

Expected<void> Unpacker::make_file(struct archive* a, const std::vector<std::string>& parts,
                                   std::string_view member, struct archive_entry* e) {
  const UnpackLimits& limits = options_.limits;
  bool declared = archive_entry_size_is_set(e);
  std::uint64_t size =
      declared ? static_cast<std::uint64_t>(std::max<la_int64_t>(0, archive_entry_size(e))) : 0;
  std::size_t parent = 0;
  KILN_TRY(Fd dir, open_parent(parts, member, parent));
  const std::string& leaf = parts.back();
  KILN_CHECK(claim_file(dir.get(), parent, leaf, member));
  Fd out(::openat(dir.get(), leaf.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  0600));
  if (out.get() < 0) return sys_error(member, "create", errno);
  std::uint64_t written = 0;
  for (;;) {
    const void* buf = nullptr;
    std::size_t n = 0;
    la_int64_t offset = 0;
    int r = archive_read_data_block(a, &buf, &n, &offset);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK) return lib_error(a, member);  // a warning too: e.g. a zip member's bad CRC
    if (static_cast<std::uint64_t>(offset) != written)
      return bad(member, "has sparse or out-of-order data, which kiln does not extract");
    if (declared && written + n > size)
      return bad(member, cat("holds more data than its declared ", size, " bytes"));
    if (written + n > limits.max_entry_bytes)
      return bad(member,
                 cat("is larger than the ", limits.max_entry_bytes, "-byte limit per member"));
    if (result_.bytes + n > limits.max_total_bytes)
      return bad(member, cat("takes the archive over the ", limits.max_total_bytes,
                             "-byte limit for all members"));
    const char* p = static_cast<const char*>(buf);
    std::size_t left = n;
    while (left > 0) {
      ssize_t w = ::write(out.get(), p, left);
      if (w < 0) {
        if (errno == EINTR) continue;
        return sys_error(member, "write", errno);
      }
      p += w;
      left -= static_cast<std::size_t>(w);
    }
    written += n;
    result_.bytes += n;
  }
  if (declared && written != size)
    return bad(member, cat("holds ", written, " bytes, fewer than its declared ", size));
  bool exec = (archive_entry_perm(e) & 0111) != 0;
  if (::fchmod(out.get(), exec ? 0755 : 0644) != 0) return sys_error(member, "chmod", errno);
  if (::close(out.release()) != 0) return sys_error(member, "write", errno);
  return {};
}

Expected<void> Unpacker::make_symlink(const std::vector<std::string>& parts,
                                      std::string_view member, const std::string& target) {
  std::size_t parent = 0;
  KILN_TRY(Fd dir, open_parent(parts, member, parent));
  const std::string& leaf = parts.back();
  if (std::size_t existing = child(parent, leaf)) {
    const Node& node = nodes_[existing];
    if (node.kind == Kind::Symlink && node.target == target) return {};  // identical duplicate
    if (node.kind == Kind::Symlink)
      return bad(member, cat("is a symlink to '", printable(target),
                             "' but an earlier member made it a symlink to '",
                             printable(node.target), "'"));
    return bad(member, cat("is a symlink but an earlier member made it ", kind_name(node.kind)));
  }
  if (::symlinkat(target.c_str(), dir.get(), leaf.c_str()) != 0)
    return sys_error(member, "create", errno);
  KILN_TRY(std::size_t id, add_node(parent, leaf, Kind::Symlink, member));
  nodes_[id].target = target;
  symlinks_.push_back(id);
  return {};
}

Expected<void> Unpacker::make_hardlink(const std::vector<std::string>& parts,
                                       std::string_view member,
                                       const std::vector<std::string>& target_parts,
                                       std::string_view target) {
  std::size_t node = 0;
  for (std::size_t i = 0; i < target_parts.size(); ++i) {
    node = child(node, target_parts[i]);
    bool last = i + 1 == target_parts.size();
    if (node == 0 || (last && nodes_[node].kind != Kind::File) ||
        (!last && nodes_[node].kind != Kind::Dir))
      return bad(member, cat("is a hardlink to '", printable(target),
                             "', which is not an earlier file member"));
  }
  std::size_t parent = 0;
  KILN_TRY(Fd dir, open_parent(parts, member, parent));
  const std::string& leaf = parts.back();
  if (child(parent, leaf) == node) return bad(member, "is a hardlink to itself");
  KILN_CHECK(claim_file(dir.get(), parent, leaf, member));
  // The target's path holds only directories this unpack created (checked above), and linkat
  // without AT_SYMLINK_FOLLOW does not follow a final symlink.
  std::string target_path = path_of(node);
  if (::linkat(root_fd_, target_path.c_str(), dir.get(), leaf.c_str(), 0) != 0)
    return sys_error(member, "link", errno);
  return {};
}

// Resolves a symlink the way the kernel would, following the tree's own symlinks; components that
// do not exist are resolved as text. Returns why it leaves the tree, or "".
std::string Unpacker::escapes(std::size_t link) const {
  constexpr std::size_t kMissing = static_cast<std::size_t>(-1);
  std::vector<std::size_t> stack;  // node ids from the root; kMissing: a component not in the tree
  for (std::size_t n = nodes_[link].parent;; n = nodes_[n].parent) {
    stack.push_back(n);
    if (n == 0) break;
  }
  std::reverse(stack.begin(), stack.end());
  std::deque<std::string> pending;
  for (auto& part : split(nodes_[link].target, "/")) pending.push_back(std::move(part));
  int hops = 0;
  std::size_t steps = 0;
  while (!pending.empty()) {
    if (++steps > kMaxResolveSteps) return "is too deep to resolve";
    std::string part = std::move(pending.front());
    pending.pop_front();
    if (part == ".") continue;
    if (part == "..") {
      if (stack.size() == 1) return "leaves the destination";
      stack.pop_back();
      continue;
    }
    std::size_t top = stack.back();
    std::size_t next = top == kMissing ? 0 : child(top, part);
    if (next == 0 || nodes_[next].kind == Kind::File) {
      stack.push_back(kMissing);
    } else if (nodes_[next].kind == Kind::Dir) {
      stack.push_back(next);
    } else {
      if (++hops > kMaxSymlinkHops) return "is part of a symlink loop";
      const std::string& target = nodes_[next].target;
      if (!target.empty() && target.front() == '/')
        return cat("leaves the destination through symlink '", printable(path_of(next)), "'");
      auto parts = split(target, "/");
      pending.insert(pending.begin(), parts.begin(), parts.end());
    }
  }
  return {};
}

Expected<void> Unpacker::settle(std::size_t node, std::string& path, const timespec* times) {
  for (const auto& [name, id] : nodes_[node].children) {
    std::size_t length = path.size();
    if (!path.empty()) path += '/';
    path += name;
    if (nodes_[id].kind == Kind::Dir) {
      KILN_CHECK(settle(id, path, times));
      if (::fchmodat(root_fd_, path.c_str(), 0755, 0) != 0) return sys_error(path, "chmod", errno);
    }
    if (::utimensat(root_fd_, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0)
      return sys_error(path, "set the time of", errno);
    path.resize(length);
  }
  return {};
}

Expected<void> Unpacker::finalize() {
  // Every symlink is checked again against the finished tree: a link that looked fine alone can
  // escape through a later one ("L -> a/s/../x", then "a/s -> ..").
  for (std::size_t link : symlinks_) {
    std::string why = escapes(link);
    if (!why.empty())
      return bad(path_of(link),
                 cat("is a symlink to '", printable(nodes_[link].target), "' that ", why));
  }
  timespec times[2];
  times[0].tv_sec = times[1].tv_sec = static_cast<time_t>(options_.mtime);
  times[0].tv_nsec = times[1].tv_nsec = 0;
  // Modes and times once every write is done (writing into a directory would move its mtime).
  // Paths are relative to the root and hold only directories this unpack created.
  std::string path;
  KILN_CHECK(settle(0, path, times));
  if (::fchmod(root_fd_, 0755) != 0 || ::futimens(root_fd_, times) != 0)
    return Error::failed(cat("archive ", archive_name_,
                             ": cannot set the destination's mode or time: ", errno_text(errno)));
  for (const auto& [name, id] : nodes_[0].children) result_.top_level.push_back(name);
  return {};
}

// A member the filter rejects, with skip_rejected: left unread once its name passed.
bool Unpacker::skipped(struct archive_entry* e, const std::vector<std::string>& parts) const {
  if (!options_.filter || !options_.skip_rejected || parts.empty()) return false;
  std::string path = join(parts, "/");
  if (archive_entry_hardlink(e) == nullptr && archive_entry_filetype(e) == AE_IFDIR) path += '/';
  return !options_.filter(path);
}

Expected<void> Unpacker::entry(struct archive* a, struct archive_entry* e) {
  const UnpackLimits& limits = options_.limits;
  const char* raw = archive_entry_pathname(e);
  if (raw == nullptr) raw = archive_entry_pathname_utf8(e);
  if (raw == nullptr)
    return Error::bad_input(
        cat("archive ", archive_name_, ": a member ",
            last_member_.empty() ? std::string("") : cat("after '", printable(last_member_), "' "),
            "has no readable name"));
  std::string member = raw;
  if (++seen_ > limits.max_entries)
    return bad(member, cat("is past the limit of ", limits.max_entries, " members"));
  std::vector<std::string> parts;
  if (std::string why = split_member(member, parts); !why.empty()) return bad(member, why);

  if (skipped(e, parts)) return {};

  mode_t mode = archive_entry_mode(e);
  if (mode & (S_ISUID | S_ISGID | S_ISVTX))
    return bad(member, cat("has setuid, setgid or sticky bits (mode ", octal(mode & 07777), ")"));

  const char* hardlink = archive_entry_hardlink(e);
  mode_t type = archive_entry_filetype(e);
  std::vector<std::string> target_parts;
  std::string target;
  if (hardlink != nullptr) {
    target = hardlink;
    if (!split_member(target, target_parts).empty() || target_parts.empty())
      return bad(member,
                 cat("is a hardlink to '", printable(target), "', outside the destination"));
    if (archive_entry_size_is_set(e) && archive_entry_size(e) > 0)
      return bad(member, "is a hardlink that carries data");
  } else {
    switch (type) {
      case AE_IFREG:
      case AE_IFDIR:
        break;
      case AE_IFLNK: {
        const char* link = archive_entry_symlink(e);
        if (link == nullptr) link = archive_entry_symlink_utf8(e);
        target = link ? link : "";
        if (target.empty()) return bad(member, "is a symlink with an empty target");
        if (target.size() > kMaxNameBytes)
          return bad(member,
                     cat("is a symlink with a target longer than ", kMaxNameBytes, " bytes"));
        if (target.front() == '/')
          return bad(member, cat("is a symlink to '", printable(target), "', an absolute path"));
        if (parts.empty() || !lexically_inside(target, parts.size() - 1))
          return bad(member,
                     cat("is a symlink to '", printable(target), "', outside the destination"));
        break;
      }
      case AE_IFCHR:
        return bad(member, "is a character device");
      case AE_IFBLK:
        return bad(member, "is a block device");
      case AE_IFIFO:
        return bad(member, "is a FIFO");
      case AE_IFSOCK:
        return bad(member, "is a socket");
      default:
        return bad(member, cat("has an unsupported type (", octal(type >> 12), ")"));
    }
  }
  bool is_dir = hardlink == nullptr && type == AE_IFDIR;
  if (parts.empty()) {
    if (is_dir) return {};  // "./": the destination itself
    return bad(member, "has an empty name");
  }

  if (options_.filter) {
    std::string path = join(parts, "/");
    if (is_dir) path += '/';
    if (!options_.filter(path)) return {};
  }

  if (hardlink == nullptr && type == AE_IFREG && archive_entry_size_is_set(e)) {
    la_int64_t size = archive_entry_size(e);
    if (size < 0) return bad(member, "declares a negative size");
    auto declared = static_cast<std::uint64_t>(size);
    if (declared > limits.max_entry_bytes)
      return bad(member, cat("declares ", declared, " bytes, over the ", limits.max_entry_bytes,
                             "-byte limit per member"));
    if (result_.bytes + declared > limits.max_total_bytes)
      return bad(member, cat("declares ", declared, " bytes, taking the archive over the ",
                             limits.max_total_bytes, "-byte limit for all members"));
  }

  ++result_.entries;
  if (hardlink != nullptr) return make_hardlink(parts, member, target_parts, target);
  switch (type) {
    case AE_IFDIR:
      return make_dir(parts, member);
    case AE_IFLNK:
      return make_symlink(parts, member, target);
    default:
      return make_file(a, parts, member, e);
  }
}

Expected<UnpackResult> Unpacker::run(struct archive* a) {
  for (bool first = true;; first = false) {
    struct archive_entry* e = nullptr;
    int r = archive_read_next_header(a, &e);
    if (r != ARCHIVE_OK && r != ARCHIVE_EOF) return lib_error(a, {});
    if (first) KILN_CHECK(check_format(a));  // libarchive names the format on the first header
    if (r == ARCHIVE_EOF) break;
    KILN_CHECK(entry(a, e));
    fault_point("unpack");
    const char* name = archive_entry_pathname(e);
    last_member_ = name ? name : "";
  }
  KILN_CHECK(finalize());
  return std::move(result_);
}

// A zip's structure, checked by the strict reader wheels go through: libarchive takes a member's
// name from its local header even when the central directory says another, and silently drops
// one of two overlapping members.
Expected<void> check_zip_structure(int fd, const std::string& name) {
  char magic[2] = {};
  if (::pread(fd, magic, sizeof magic, 0) != static_cast<ssize_t>(sizeof magic)) return {};
  if (std::string_view(magic, 2) != "PK") return {};
  // The same file; member names are checked by the unpacker, in its own words.
  auto zip =
      ZipReader::open(fs::path("/proc/self/fd") / std::to_string(fd), name, /*check_names=*/false);
  if (!zip) return std::move(zip).error();
  return {};
}

Expected<void> rename_no_replace(const fs::path& from, const fs::path& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return {};
  int err = errno;
  if (err == EINVAL || err == ENOSYS) {  // a filesystem without RENAME_NOREPLACE
    struct stat st;
    if (::lstat(to.c_str(), &st) == 0)
      err = EEXIST;
    else if (::rename(from.c_str(), to.c_str()) == 0)
      return {};
    else
      err = errno;
  }
  return Error::failed(
      cat("cannot rename ", from.string(), " to ", to.string(), ": ", errno_text(err)));
}

}  // namespace

Expected<UnpackResult> unpack(const fs::path& archive_path, const fs::path& dest_arg,
                              const UnpackOptions& options) {
  fs::path dest = dest_arg.has_filename() ? dest_arg : dest_arg.parent_path();
  std::string name = archive_path.filename().string();
  struct stat st;
  if (::lstat(dest.c_str(), &st) == 0)
    return Error::failed(
        cat("cannot unpack archive ", name, ": ", dest.string(), " already exists"));
  if (errno != ENOENT)
    return Error::failed(
        cat("cannot unpack archive ", name, ": ", dest.string(), ": ", errno_text(errno)));

  Fd input(::open(archive_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (input.get() < 0)
    return Error::failed(
        cat("cannot open archive ", archive_path.string(), ": ", errno_text(errno)));
  if (::fstat(input.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return Error::failed(cat("cannot unpack ", archive_path.string(), ": not a regular file"));

  Utf8Ctype utf8;  // before the reader: libarchive picks its name conversion when first needed
  ArchivePtr a(archive_read_new());
  if (!a) return Error::failed("cannot allocate a libarchive reader");
  // Only the formats and filters kiln accepts are enabled: nothing else is parsed at all, and no
  // filter may fall back to an external program (libarchive then answers ARCHIVE_WARN).
  struct Support {
    int (*enable)(struct archive*);
    const char* what;
  };
  const Support supports[] = {
      {archive_read_support_format_tar, "tar"},   {archive_read_support_format_zip, "zip"},
      {archive_read_support_filter_gzip, "gzip"}, {archive_read_support_filter_bzip2, "bzip2"},
      {archive_read_support_filter_xz, "xz"},     {archive_read_support_filter_zstd, "zstd"},
  };
  for (const auto& s : supports)
    if (s.enable(a.get()) != ARCHIVE_OK)
      return Error::failed(cat("libarchive lacks built-in ", s.what, " support"));

  fs::path parent = dest.parent_path().empty() ? fs::path(".") : dest.parent_path();
  KILN_TRY(TempDir temp, TempDir::create(parent, cat(".", dest.filename().string(), ".unpack-")));
  Fd root(::open(temp.path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (root.get() < 0)
    return Error::failed(cat("cannot open ", temp.path().string(), ": ", errno_text(errno)));

  KILN_CHECK(check_zip_structure(input.get(), name));
  Unpacker unpacker(name, options, root.get());
  if (archive_read_open_fd(a.get(), input.get(), kReadBlock) != ARCHIVE_OK)
    return unpacker.open_error(a.get());
  KILN_TRY(UnpackResult result, unpacker.run(a.get()));
  // The rest of the compressed stream (after the tar end marker: padding, the trailer) is checked
  // too; a few records of padding may follow what libarchive read.
  const auto read =
      static_cast<std::uint64_t>(std::max<la_int64_t>(0, archive_filter_bytes(a.get(), 0)));
  KILN_CHECK(check_compressed_stream(input.get(), archive_filter_code(a.get(), 0),
                                     read + (1u << 20), name));
  archive_read_close(a.get());
  root.reset();
  KILN_CHECK(rename_no_replace(temp.path(), dest));
  temp.release();
  KILN_CHECK(fsync_directory(parent));
  return result;
}

}  // namespace kiln::archive
