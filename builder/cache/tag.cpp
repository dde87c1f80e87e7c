// What makes a directory a kiln cache: CACHEDIR.TAG (the Cache Directory Tagging Specification,
// which backup tools honour) with kiln's own line, written when kiln first writes a cache; for a
// cache from before the tag, kiln's own layout. gc and evict act on nothing else.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>

#include "cache/store.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/strings.h"
#include "core/terminal.h"

namespace kiln::cache {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kSignature = "Signature: 8a477f597d28d172789f06886806bc55";
constexpr std::string_view kKilnLine = "# This file is a cache directory tag created by kiln.";
constexpr std::string_view kTagText =
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by kiln.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n";

// Every name kiln makes at a cache's top level (Store's folders, the tag, the checkout's
// placeholder), and the folders only a kiln cache holds.
constexpr std::array<std::string_view, 15> kLayoutNames = {
    "CACHEDIR.TAG", ".gitkeep", "wheels", "objects",  "downloads", "tmp",  "locks",      "last",
    "logs",         "build",    "git",    "sysroots", "toolkits",  "envs", "kiln-wheels"};
constexpr std::array<std::string_view, 5> kKilnFolders = {"wheels", "objects", "downloads", "locks",
                                                          "last"};

bool is_layout_name(std::string_view name) {
  return std::find(kLayoutNames.begin(), kLayoutNames.end(), name) != kLayoutNames.end();
}

// The tag file's text when it is a regular file of at most 4 KiB (never followed through a link).
std::optional<std::string> read_tag(const fs::path& root) {
  UniqueFd fd(
      ::open((root / "CACHEDIR.TAG").c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > 4096)
    return std::nullopt;
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  ssize_t n = ::read(fd.get(), text.data(), text.size());
  if (n < 0) return std::nullopt;
  text.resize(static_cast<std::size_t>(n));
  return text;
}

bool is_kiln_tag(std::string_view text) {
  return text.starts_with(kSignature) && text.find(kKilnLine) != std::string_view::npos;
}

}  // namespace

Expected<void> Store::mark() const {
  if (marked_) return {};
  KILN_CHECK(ensure_directory(root_));
  if (auto text = read_tag(root_); text && is_kiln_tag(*text)) {
    marked_ = true;
    return {};
  }
  std::error_code ec;
  if (fs::exists(fs::symlink_status(root_ / "CACHEDIR.TAG", ec)))
    return {};  // another tool's tag (or something else): left as it is; the layout still tells
  KILN_CHECK(write_file_atomic(root_ / "CACHEDIR.TAG", kTagText));
  marked_ = true;
  return {};
}

Expected<void> Store::recognise() const {
  std::error_code ec;
  if (!fs::exists(root_, ec)) return {};  // nothing to act on
  if (!fs::is_directory(root_, ec))
    return Error::bad_input(cat(root_.string(), " is not a directory, so not a kiln cache"));
  if (auto text = read_tag(root_); text && is_kiln_tag(*text)) return {};
  // No tag of kiln's: a cache from before the tag when every name in it is one kiln makes and at
  // least one folder is one only kiln's cache has; it gets its tag now. An empty directory has
  // nothing to act on.
  bool any = false, kiln_folder = false;
  std::string foreign;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    any = true;
    if (!is_layout_name(name)) {
      foreign = name;
      break;
    }
    kiln_folder = kiln_folder || (std::find(kKilnFolders.begin(), kKilnFolders.end(), name) !=
                                      kKilnFolders.end() &&
                                  it->is_directory(ec));  // a shared part may be a link
  }
  if (ec) return Error::failed(cat("cannot list ", root_.string(), ": ", ec.message()));
  if (!any) return {};
  if (foreign.empty() && kiln_folder) {
    log::info(
        cat("marked ", root_.string(), " as a kiln cache (CACHEDIR.TAG): its layout is kiln's"));
    return mark();
  }
  std::string why =
      !foreign.empty() ? cat("it holds '", terminal_field(foreign, 80), "', which kiln never makes")
                       : std::string("it has none of kiln's folders");
  return Error::bad_input(cat(root_.string(),
                              " is not a kiln cache: no CACHEDIR.TAG of kiln's, and ", why,
                              " (kiln acts only on a cache it made; check --cache, "
                              "$KILN_CACHE and the configuration's 'cache')"));
}

}  // namespace kiln::cache
