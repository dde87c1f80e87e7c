#include "archive/copy.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/strings.h"

namespace kiln::archive {

namespace {

namespace fs = std::filesystem;

struct Link {
  fs::path rel;  // relative to the tree's top
  std::string target;
};

class TreeCopier {
 public:
  TreeCopier(fs::path from, const CopyLimits& limits) : from_(std::move(from)), limits_(limits) {}

  Expected<void> copy_dir(int src, int dst, const fs::path& rel, int depth);
  Expected<void> make_links(const fs::path& dest, int dst);

 private:
  Expected<void> copy_file(int src, int dst, const std::string& name, const fs::path& rel);
  Error bad(const fs::path& rel, std::string_view what) const {
    return Error::bad_input(cat("local source ", from_.string(), ": '",
                                printable_excerpt(rel.string(), 200), "' ", what));
  }
  Error sys(const fs::path& rel, std::string_view what) const {
    return Error::failed(
        cat("cannot ", what, " ", (from_ / rel).string(), ": ", std::strerror(errno)));
  }

  fs::path from_;
  const CopyLimits& limits_;
  std::uint64_t entries_ = 0;
  std::uint64_t bytes_ = 0;
  std::vector<Link> links_;
};

Expected<std::vector<std::string>> list_names(int dir) {
  int fd = ::dup(dir);
  DIR* d = fd < 0 ? nullptr : ::fdopendir(fd);
  if (d == nullptr) {
    if (fd >= 0) ::close(fd);
    return Error::failed(std::strerror(errno));
  }
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  int err = errno;
  ::closedir(d);
  if (err != 0) return Error::failed(std::strerror(err));
  std::sort(names.begin(), names.end());
  return names;
}

Expected<void> TreeCopier::copy_dir(int src, int dst, const fs::path& rel, int depth) {
  auto names = list_names(src);
  if (!names)
    return Error::failed(cat("cannot list ", (from_ / rel).string(), ": ", names.error().message));
  for (const auto& name : *names) {
    fs::path child = rel / name;
    if (++entries_ > limits_.max_entries)
      return bad(child, cat("takes the tree past ", limits_.max_entries, " entries"));
    // Such names would reach RECORD, whose rows installers split at every line break.
    if (std::string c = control_character(name); !c.empty())
      return bad(child, cat("has a control character (", c, ") in its name"));
    struct stat st;
    if (::fstatat(src, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return sys(child, "read");
    if (S_ISDIR(st.st_mode)) {
      if (name == ".git" || name == "__pycache__") continue;
      if (depth + 1 > limits_.max_depth)
        return bad(child, cat("is more than ", limits_.max_depth, " directories deep"));
      if (::mkdirat(dst, name.c_str(), 0755) != 0) return sys(child, "copy");
      UniqueFd sub_src(
          ::openat(src, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      UniqueFd sub_dst(
          ::openat(dst, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub_src.get() < 0 || sub_dst.get() < 0) return sys(child, "open");
      KILN_CHECK(copy_dir(sub_src.get(), sub_dst.get(), child, depth + 1));
    } else if (S_ISREG(st.st_mode)) {
      KILN_CHECK(copy_file(src, dst, name, child));
    } else if (S_ISLNK(st.st_mode)) {
      std::string target(4096, '\0');
      ssize_t n = ::readlinkat(src, name.c_str(), target.data(), target.size());
      if (n < 0) return sys(child, "read the link");
      if (static_cast<std::size_t>(n) >= target.size())
        return bad(child, "is a symlink with an overlong target");
      target.resize(static_cast<std::size_t>(n));
      links_.push_back({child, std::move(target)});
    }  // FIFOs, sockets and devices are not sources
  }
  return {};
}

Expected<void> TreeCopier::copy_file(int src, int dst, const std::string& name,
                                     const fs::path& rel) {
  UniqueFd in(::openat(src, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (in.get() < 0) return sys(rel, "read");
  struct stat st;
  if (::fstat(in.get(), &st) != 0) return sys(rel, "read");
  if (!S_ISREG(st.st_mode)) return bad(rel, "stopped being a regular file while it was copied");
  UniqueFd out(
      ::openat(dst, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (out.get() < 0) return sys(rel, "copy");
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(in.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys(rel, "read");
    if (n == 0) break;
    bytes_ += static_cast<std::uint64_t>(n);
    if (bytes_ > limits_.max_total_bytes)
      return bad(rel, cat("takes the tree over the ", limits_.max_total_bytes, "-byte limit"));
    for (ssize_t done = 0; done < n;) {
      ssize_t w = ::write(out.get(), buf + done, static_cast<std::size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0)
        return Error::failed(
            cat("cannot write the copy of ", (from_ / rel).string(), ": ", std::strerror(errno)));
      done += w;
    }
  }
  if (::fchmod(out.get(), (st.st_mode & 0111) ? 0755 : 0644) != 0) return sys(rel, "copy");
  return {};
}

// Links are made once every file and directory is in place: a link whose target (through the
// source's own links) resolves outside the source is refused; an absolute one inside it becomes
// relative. Then each is resolved again in the copy, which only kiln writes.
Expected<void> TreeCopier::make_links(const fs::path& dest, int dst) {
  std::error_code ec;
  const fs::path top = fs::canonical(from_, ec);
  if (ec) return Error::failed(cat("cannot resolve ", from_.string(), ": ", ec.message()));
  for (auto& link : links_) {
    std::string shown = cat("is a symlink to '", printable_excerpt(link.target, 200), "'");
    if (link.target.empty()) return bad(link.rel, "is a symlink with an empty target");
    if (link.target.front() == '/') {
      fs::path resolved = fs::weakly_canonical(link.target, ec);
      if (ec || !path_within(resolved, top))
        return bad(link.rel, cat(shown, ", which resolves outside the source directory"));
      link.target = resolved.lexically_relative(top / link.rel.parent_path()).string();
    }
  }
  for (const auto& link : links_) {
    int parent = dst;
    UniqueFd dir;
    if (link.rel.has_parent_path() && !link.rel.parent_path().empty()) {
      dir.reset(::openat(dst, link.rel.parent_path().c_str(),
                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (dir.get() < 0) return sys(link.rel, "copy");
      parent = dir.get();
    }
    if (::symlinkat(link.target.c_str(), parent, link.rel.filename().c_str()) != 0)
      return sys(link.rel, "copy");
  }
  const fs::path copy_top = fs::canonical(dest, ec);
  if (ec) return Error::failed(cat("cannot resolve ", dest.string(), ": ", ec.message()));
  for (const auto& link : links_) {
    std::string shown = cat("is a symlink to '", printable_excerpt(link.target, 200), "'");
    fs::path resolved = fs::weakly_canonical(dest / link.rel, ec);
    struct stat st;
    if (!ec && ::stat((dest / link.rel).c_str(), &st) != 0 && errno == ELOOP)
      ec = std::make_error_code(std::errc::too_many_symbolic_link_levels);
    if (ec) return bad(link.rel, cat(shown, " that cannot be resolved (", ec.message(), ")"));
    if (!path_within(resolved, copy_top))
      return bad(link.rel, cat(shown, ", which resolves outside the source directory"));
  }
  return {};
}

}  // namespace

Expected<void> copy_tree(const fs::path& from, const fs::path& dest, const CopyLimits& limits) {
  UniqueFd src(::open(from.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (src.get() < 0)
    return Error::failed(cat("cannot open ", from.string(), ": ", std::strerror(errno)));
  if (!dest.parent_path().empty()) KILN_CHECK(ensure_directory(dest.parent_path()));
  if (::mkdir(dest.c_str(), 0755) != 0)
    return Error::failed(cat("cannot create ", dest.string(), ": ", std::strerror(errno)));
  UniqueFd dst(::open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  TreeCopier copier(from, limits);
  Expected<void> done = dst.get() < 0
                            ? Expected<void>(Error::failed(
                                  cat("cannot open ", dest.string(), ": ", std::strerror(errno))))
                            : copier.copy_dir(src.get(), dst.get(), {}, 0);
  if (done) done = copier.make_links(dest, dst.get());
  if (!done) {
    std::error_code ec;
    fs::remove_all(dest, ec);
  }
  return done;
}

}  // namespace kiln::archive
