// git sources (libgit2): a bare mirror per URL in <cache>/git/, the pinned commit's tree written
// out raw (no eol, ident or LFS filters, so the bytes do not depend on git configuration), and
// only the submodules the manifest lists.
#include <fcntl.h>
#include <git2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "cache/store.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/interrupt.h"
#include "core/log.h"
#include "core/strings.h"
#include "fetch/backends.h"
#include "fetch/git_pack_guard.h"
#include "fetch/git_stream.h"
#include "fetch/http.h"
#include "fetch/ini.h"
#include "fetch/url.h"

namespace kiln::fetch {

namespace {

template <class T, void (*Free)(T*)>
struct Freer {
  void operator()(T* p) const { Free(p); }
};
using RepoPtr = std::unique_ptr<git_repository, Freer<git_repository, git_repository_free>>;
using RemotePtr = std::unique_ptr<git_remote, Freer<git_remote, git_remote_free>>;
using CommitPtr = std::unique_ptr<git_commit, Freer<git_commit, git_commit_free>>;
using TreePtr = std::unique_ptr<git_tree, Freer<git_tree, git_tree_free>>;
using BlobPtr = std::unique_ptr<git_blob, Freer<git_blob, git_blob_free>>;
using RefPtr = std::unique_ptr<git_reference, Freer<git_reference, git_reference_free>>;

// The most objects one fetched pack may hold (a kernel-sized history has about 10 million).
constexpr std::uint32_t kMaxPackObjects = 20'000'000;

void init_libgit2() {
  static std::once_flag once;
  std::call_once(once, [] {
    git_libgit2_init();
    register_git_stream();
    // The bundle the HTTP client uses (a bad $SSL_CERT_FILE is its error to report).
    auto bundle = ca_bundle_file();
    std::string file = bundle ? *bundle : std::string();
    std::string dir = env_value("SSL_CERT_DIR");
    if (!file.empty() || !dir.empty())
      git_libgit2_opts(GIT_OPT_SET_SSL_CERT_LOCATIONS, file.empty() ? nullptr : file.c_str(),
                       dir.empty() ? nullptr : dir.c_str());
    std::string agent = user_agent();
    git_libgit2_opts(GIT_OPT_SET_USER_AGENT, agent.c_str());
  });
}

std::string git_why() {
  const git_error* e = git_error_last();
  return e && e->message ? std::string(trim(e->message)) : std::string("unknown libgit2 error");
}

std::string errno_text() {
  return std::strerror(errno);
}

// What every checkout of one fetch shares: the cache, --offline, and the limits of what a
// remote may send (KILN_MAX_DOWNLOAD for the pack and any one object, the fetch's deadline).
struct GitOptions {
  const cache::Store& store;
  bool offline = false;
  std::uint64_t max_bytes = 0;
  std::int64_t deadline_s = 0;
};

// Where a commit lives: its URL for messages, and an open mirror holding it.
struct Pinned {
  std::string url;     // redacted, for messages
  std::string commit;  // 40 hex digits
  RepoPtr repo;
  bool fetched = false;  // network I/O was needed
  fs::path mirror;       // where the cache keeps it
};

Expected<RepoPtr> open_or_init_mirror(const cache::GitMirror& mirror, bool& made) {
  const fs::path& dir = mirror.path();
  git_repository* repo = nullptr;
  std::error_code ec;
  made = false;
  if (fs::exists(dir / "HEAD", ec)) {
    if (git_repository_open_bare(&repo, dir.c_str()) == 0) return RepoPtr(repo);
    log::warn(cat("git mirror ", dir.string(), " is damaged (", git_why(), "); making it again"));
    mirror.empty();
  }
  if (git_repository_init(&repo, dir.c_str(), /*is_bare=*/1) != 0)
    return Error::failed(cat("cannot create git mirror ", dir.string(), ": ", git_why()));
  made = true;
  return RepoPtr(repo);
}

bool has_commit(git_repository* repo, const git_oid& oid) {
  git_commit* commit = nullptr;
  if (git_commit_lookup(&commit, repo, &oid) != 0) return false;
  git_commit_free(commit);
  return true;
}

// How a fetch ended: fetched; the remote could not be reached (or spoke no git); or it was
// reached and did not send what was asked for.
enum class FetchEnd { Fetched, Unreachable, Refused };

// One fetch of `refspecs` from `url` into `repo`; `why` says what libgit2 said when it failed.
FetchEnd fetch_refspecs(git_repository* repo, const std::string& url,
                        const std::vector<std::string>& refspecs, std::string& why) {
  git_remote* raw = nullptr;
  if (git_remote_create_anonymous(&raw, repo, url.c_str()) != 0) {
    why = git_why();
    return FetchEnd::Unreachable;
  }
  RemotePtr remote(raw);
  std::vector<char*> specs;
  for (const auto& s : refspecs) specs.push_back(const_cast<char*>(s.c_str()));
  git_strarray array{specs.data(), specs.size()};
  git_fetch_options options = GIT_FETCH_OPTIONS_INIT;
  options.proxy_opts.type = GIT_PROXY_AUTO;
  options.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
  options.callbacks.transfer_progress = [](const git_indexer_progress*, void*) {
    return interrupted() || GitDeadline::passed() ? -1 : 0;
  };
  options.callbacks.sideband_progress = [](const char*, int, void*) {
    return interrupted() || GitDeadline::passed() ? -1 : 0;
  };
  if (git_remote_connect(remote.get(), GIT_DIRECTION_FETCH, &options.callbacks, &options.proxy_opts,
                         nullptr) != 0) {
    why = git_why();
    return FetchEnd::Unreachable;
  }
  if (git_remote_download(remote.get(), &array, &options) != 0 ||
      git_remote_update_tips(remote.get(), &options.callbacks, 0, GIT_REMOTE_DOWNLOAD_TAGS_NONE,
                             "kiln: fetch") != 0) {
    why = git_why();
    git_remote_disconnect(remote.get());
    return FetchEnd::Refused;
  }
  git_remote_disconnect(remote.get());
  return FetchEnd::Fetched;
}

// Fetches exactly `commit` from `from` (the manifest's URL, or its mirror) into the mirror `repo`:
// only the pinned commit, never a fallback to every branch and tag, each pack checked by the
// guard, the whole fetch within its deadline.
Expected<void> fetch_commit(git_repository* repo, const GitOptions& o, const std::string& from,
                            const std::string& commit, const std::string& shown) {
  auto report = std::make_shared<PackGuardReport>();
  PackLimits limits{o.max_bytes, o.max_bytes, kMaxPackObjects};
  KILN_CHECK(guard_pack_writes(repo, limits, report));
  GitDeadline deadline(o.deadline_s);
  std::string why;
  FetchEnd end = fetch_refspecs(repo, from, {cat("+", commit, ":refs/kiln/", commit)}, why);
  if (interrupted()) return Error::interrupted();
  if (!report->refused.empty())
    return Error::failed(cat("cannot fetch ", shown, ": ", report->refused,
                             " (KILN_MAX_DOWNLOAD raises the limit)"));
  if (GitDeadline::passed())
    return Error::failed(cat("cannot fetch ", shown, ": no whole answer within the deadline of ",
                             o.deadline_s, " s (KILN_GIT_DEADLINE)"));
  if (end == FetchEnd::Unreachable) return Error::failed(cat("cannot fetch ", shown, ": ", why));
  if (end == FetchEnd::Refused)
    return Error::failed(cat("commit ", commit, " not found in ", shown,
                             " (it did not send that commit by its id: ", why, ")"));
  return {};
}

// The mirror of `url`, holding `commit` (fetched when missing). A mirror this call made is
// removed again when the fetch fails: nothing of a failed fetch stays in the cache.
Expected<Pinned> ensure_commit(const GitOptions& o, const std::string& url,
                               const std::string& commit) {
  init_libgit2();
  std::string shown = redact_url(url);
  if (commit.size() != 40 || !is_hex(commit) || lower(commit) != commit)
    return Error::bad_input(
        cat("bad commit '", commit, "' for ", shown, ": expected 40 lowercase hexadecimal digits"));
  git_oid oid;
  if (git_oid_fromstr(&oid, commit.c_str()) != 0)
    return Error::bad_input(cat("bad commit '", commit, "' for ", shown));
  // The git cache is keyed by the manifest's URL; a $KILN_GIT_MIRRORS mirror only serves the
  // bytes, which the commit id checks.
  KILN_TRY(std::string from, git_fetch_url(env_value("KILN_GIT_MIRRORS"), url));
  KILN_TRY(cache::GitMirror mirror, o.store.git_mirror(url));
  bool made = false;
  KILN_TRY(RepoPtr repo, open_or_init_mirror(mirror, made));
  Pinned pinned{shown, commit, nullptr, false, mirror.path()};
  if (!has_commit(repo.get(), oid)) {
    if (o.offline) {
      if (made) repo.reset(), mirror.remove();
      return Error::failed(cat("commit ", commit, " of ", shown,
                               " is not in the git cache and --offline forbids fetching it"));
    }
    if (from != url) shown = cat(shown, " (mirror ", redact_url(from), ")");
    log::info(cat("fetching ", shown));
    pinned.fetched = true;
    auto fetched = fetch_commit(repo.get(), o, from, commit, shown);
    if (fetched && !has_commit(repo.get(), oid))
      fetched = Error::failed(cat("commit ", commit, " not found in ", shown));
    if (!fetched) {
      if (made) repo.reset(), mirror.remove();
      return fetched.error();
    }
    // Keep the commit reachable in the mirror whatever the remote's branches do later.
    git_reference* ref = nullptr;
    if (git_reference_create(&ref, repo.get(), cat("refs/kiln/", commit).c_str(), &oid, 1,
                             "kiln: pin") == 0)
      git_reference_free(ref);
  }
  pinned.repo = std::move(repo);
  return pinned;
}

bool is_safe_entry_name(std::string_view name) {
  return is_safe_filename(name) && lower(name) != ".git";
}

struct Gitlink {
  std::string path;  // relative to the checkout
  git_oid oid;
};

Expected<void> write_blob(git_repository* repo, const git_oid* id, const fs::path& path, int mode,
                          const Pinned& where, std::uint64_t max_bytes) {
  // Its size first, from the object's header: a blob past the limit is never read into memory.
  git_odb* odb = nullptr;
  std::size_t size_in_header = 0;
  git_object_t type = GIT_OBJECT_INVALID;
  int rc = git_repository_odb(&odb, repo);
  if (rc == 0) rc = git_odb_read_header(&size_in_header, &type, odb, id);
  git_odb_free(odb);
  if (rc != 0)
    return Error::failed(cat("commit ", where.commit, " of ", where.url, ": cannot read ",
                             path.string(), ": ", git_why()));
  if (size_in_header > max_bytes)
    return Error::failed(cat("commit ", where.commit, " of ", where.url, ": ", path.string(),
                             " is ", size_in_header, " bytes, over the limit of ", max_bytes,
                             " bytes (KILN_MAX_DOWNLOAD raises it)"));
  git_blob* raw = nullptr;
  if (git_blob_lookup(&raw, repo, id) != 0)
    return Error::failed(cat("commit ", where.commit, " of ", where.url, ": cannot read ",
                             path.string(), ": ", git_why()));
  BlobPtr blob(raw);
  const char* data = static_cast<const char*>(git_blob_rawcontent(blob.get()));
  auto size = static_cast<std::size_t>(git_blob_rawsize(blob.get()));
  if (mode == 0) {  // a symlink: its target is the blob
    std::string target(data, size);
    if (target.empty() || target.find('\0') != std::string::npos)
      return Error::failed(
          cat("commit ", where.commit, " of ", where.url, ": bad symlink ", path.string()));
    if (::symlink(target.c_str(), path.c_str()) != 0)
      return Error::failed(cat("cannot create symlink ", path.string(), ": ", errno_text()));
    return {};
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return Error::failed(cat("cannot create ", path.string(), ": ", errno_text()));
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string why = errno_text();
      ::close(fd);
      return Error::failed(cat("cannot write ", path.string(), ": ", why));
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  ::fchmod(fd, static_cast<mode_t>(mode));
  if (::close(fd) != 0)
    return Error::failed(cat("cannot write ", path.string(), ": ", errno_text()));
  return {};
}

// Writes `tree` into the existing directory `dir`; gitlinks (submodules) become empty directories.
Expected<void> write_tree(git_repository* repo, const git_tree* tree, const fs::path& dir,
                          const std::string& rel, const Pinned& where, std::uint64_t max_bytes,
                          std::vector<Gitlink>& gitlinks) {
  std::size_t count = git_tree_entrycount(tree);
  for (std::size_t i = 0; i < count; ++i) {
    const git_tree_entry* entry = git_tree_entry_byindex(tree, i);
    std::string name = git_tree_entry_name(entry);
    std::string relpath = rel.empty() ? name : cat(rel, "/", name);
    if (!is_safe_entry_name(name))
      return Error::failed(
          cat("commit ", where.commit, " of ", where.url, " has an unsafe path '", relpath, "'"));
    fs::path path = dir / name;
    switch (git_tree_entry_filemode(entry)) {
      case GIT_FILEMODE_TREE: {
        if (::mkdir(path.c_str(), 0755) != 0)
          return Error::failed(cat("cannot create directory ", path.string(), ": ", errno_text()));
        git_tree* raw = nullptr;
        if (git_tree_lookup(&raw, repo, git_tree_entry_id(entry)) != 0)
          return Error::failed(cat("commit ", where.commit, " of ", where.url, ": cannot read ",
                                   relpath, ": ", git_why()));
        TreePtr sub(raw);
        KILN_CHECK(write_tree(repo, sub.get(), path, relpath, where, max_bytes, gitlinks));
        break;
      }
      case GIT_FILEMODE_BLOB:
        KILN_CHECK(write_blob(repo, git_tree_entry_id(entry), path, 0644, where, max_bytes));
        break;
      case GIT_FILEMODE_BLOB_EXECUTABLE:
        KILN_CHECK(write_blob(repo, git_tree_entry_id(entry), path, 0755, where, max_bytes));
        break;
      case GIT_FILEMODE_LINK:
        KILN_CHECK(write_blob(repo, git_tree_entry_id(entry), path, 0, where, max_bytes));
        break;
      case GIT_FILEMODE_COMMIT:
        if (::mkdir(path.c_str(), 0755) != 0)
          return Error::failed(cat("cannot create directory ", path.string(), ": ", errno_text()));
        gitlinks.push_back({relpath, *git_tree_entry_id(entry)});
        break;
      default:
        return Error::failed(
            cat("commit ", where.commit, " of ", where.url, ": unsupported entry '", relpath, "'"));
    }
  }
  return {};
}

struct SubmoduleInfo {
  std::string name;
  std::string path;
  std::string url;
};

std::string unquote(std::string_view v) {
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"')
    return std::string(v.substr(1, v.size() - 2));
  return std::string(v);
}

Expected<std::vector<SubmoduleInfo>> read_gitmodules(git_repository* repo, const git_tree* tree,
                                                     const Pinned& where) {
  std::vector<SubmoduleInfo> modules;
  const git_tree_entry* entry = git_tree_entry_byname(tree, ".gitmodules");
  if (!entry || git_tree_entry_type(entry) != GIT_OBJECT_BLOB) return modules;
  git_blob* raw = nullptr;
  if (git_blob_lookup(&raw, repo, git_tree_entry_id(entry)) != 0)
    return Error::failed(
        cat("commit ", where.commit, " of ", where.url, ": cannot read .gitmodules: ", git_why()));
  BlobPtr blob(raw);
  std::string_view text(static_cast<const char*>(git_blob_rawcontent(blob.get())),
                        static_cast<std::size_t>(git_blob_rawsize(blob.get())));
  KILN_TRY(std::vector<IniEntry> entries,
           parse_ini(text, cat(where.url, "@", where.commit, ":.gitmodules")));
  for (const auto& e : entries) {
    std::string_view section = e.section;
    if (section.rfind("submodule", 0) != 0) continue;
    std::string name = unquote(trim(section.substr(9)));
    SubmoduleInfo* info = nullptr;
    for (auto& m : modules)
      if (m.name == name) info = &m;
    if (!info) info = &modules.emplace_back(SubmoduleInfo{name, "", ""});
    std::string key = lower(e.key);
    if (key == "path") info->path = unquote(e.value);
    if (key == "url") info->url = unquote(e.value);
  }
  return modules;
}

// git's rule for relative submodule URLs ("../other.git", "./sub"): relative to the
// superproject's URL, each "../" dropping one path component.
std::string submodule_url(const std::string& super_url, const std::string& url) {
  if (url.rfind("./", 0) != 0 && url.rfind("../", 0) != 0) return url;
  std::string base = super_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  std::string_view rest = url;
  while (true) {
    if (rest.rfind("./", 0) == 0) {
      rest.remove_prefix(2);
    } else if (rest.rfind("../", 0) == 0) {
      rest.remove_prefix(3);
      std::size_t slash = base.find_last_of("/:");
      if (slash != std::string::npos) base = base.substr(0, slash);
    } else {
      break;
    }
  }
  return cat(base, "/", rest);
}

Expected<fs::path> check_out(const GitOptions& o, const std::string& url, const std::string& commit,
                             const std::vector<std::string>& submodules, const fs::path& dir,
                             bool& fetched);

// Checks out the listed submodules (paths, or names from .gitmodules) below `dir`.
Expected<void> check_out_submodules(const GitOptions& o, const std::string& url,
                                    const Pinned& where, const git_tree* tree,
                                    const std::vector<Gitlink>& gitlinks,
                                    const std::vector<std::string>& listed, const fs::path& dir,
                                    bool& fetched) {
  if (listed.empty()) return {};
  KILN_TRY(std::vector<SubmoduleInfo> modules, read_gitmodules(where.repo.get(), tree, where));
  std::vector<bool> used(listed.size(), false);
  for (const auto& link : gitlinks) {
    const SubmoduleInfo* info = nullptr;
    for (const auto& m : modules)
      if (m.path == link.path) info = &m;
    bool wanted = false;
    std::vector<std::string> nested;
    for (std::size_t i = 0; i < listed.size(); ++i) {
      if (listed[i] == link.path || (info && listed[i] == info->name)) {
        wanted = true;
        used[i] = true;
      } else if (listed[i].rfind(link.path + "/", 0) == 0) {
        nested.push_back(listed[i].substr(link.path.size() + 1));
        used[i] = true;
      }
    }
    if (!wanted) {
      if (!nested.empty())
        return Error::bad_input(cat("submodule '", link.path, "/", nested.front(), "' of ",
                                    where.url, " needs '", link.path, "' listed too"));
      continue;
    }
    if (!info || info->url.empty())
      return Error::failed(cat("submodule '", link.path, "' of ", where.url, " at commit ",
                               where.commit, " has no url in .gitmodules"));
    // A submodule of a remote superproject never names a local path (git refuses file-transport
    // submodules by default, protocol.file.allow=user): the manifest's URL decides, before any
    // mirror rewrites it.
    std::string sub_url = submodule_url(url, info->url);
    if (is_local_git_url(sub_url) && !is_local_git_url(url))
      return Error::failed(cat("submodule '", link.path, "' of ", where.url, " at commit ",
                               where.commit, " names a local repository (",
                               printable_excerpt(redact_url(sub_url), 200),
                               "): refused for a superproject that is not local"));
    char hex[GIT_OID_HEXSZ + 1] = {0};
    git_oid_tostr(hex, sizeof hex, &link.oid);
    KILN_CHECK(check_out(o, sub_url, hex, nested, dir / link.path, fetched));
  }
  for (std::size_t i = 0; i < listed.size(); ++i)
    if (!used[i])
      return Error::bad_input(
          cat("'", listed[i], "' is not a submodule of ", where.url, " at commit ", where.commit));
  return {};
}

// Writes commit `commit` of `url` (and the listed submodules) into the existing empty `dir`;
// returns the git mirror that holds it.
Expected<fs::path> check_out(const GitOptions& o, const std::string& url, const std::string& commit,
                             const std::vector<std::string>& submodules, const fs::path& dir,
                             bool& fetched) {
  KILN_TRY(Pinned pinned, ensure_commit(o, url, commit));
  fetched = fetched || pinned.fetched;
  git_oid oid;
  git_oid_fromstr(&oid, commit.c_str());
  git_commit* raw_commit = nullptr;
  if (git_commit_lookup(&raw_commit, pinned.repo.get(), &oid) != 0)
    return Error::failed(cat("commit ", commit, " not found in ", pinned.url));
  CommitPtr c(raw_commit);
  git_tree* raw_tree = nullptr;
  if (git_commit_tree(&raw_tree, c.get()) != 0)
    return Error::failed(
        cat("commit ", commit, " of ", pinned.url, ": cannot read its tree: ", git_why()));
  TreePtr tree(raw_tree);
  std::vector<Gitlink> gitlinks;
  KILN_CHECK(write_tree(pinned.repo.get(), tree.get(), dir, "", pinned, o.max_bytes, gitlinks));
  KILN_CHECK(check_out_submodules(o, url, pinned, tree.get(), gitlinks, submodules, dir, fetched));
  return pinned.mirror;
}

class GitSource final : public Source {
 public:
  GitSource(manifest::Source source, Context& context)
      : source_(std::move(source)), context_(context) {}

  Expected<Fetched> fetch(const fs::path& checkout_dir) override {
    std::error_code ec;
    if (checkout_dir.empty()) return Error::bad_input("a git source needs a checkout directory");
    if (fs::exists(checkout_dir, ec) || fs::is_symlink(checkout_dir, ec)) {
      if (!fs::is_directory(checkout_dir, ec) || fs::is_symlink(checkout_dir, ec) ||
          !fs::is_empty(checkout_dir, ec))
        return Error::failed(cat("cannot check out ", redact_url(source_.url), " into ",
                                 checkout_dir.string(), ": it already exists"));
      fs::remove(checkout_dir, ec);
    }
    fs::path parent =
        checkout_dir.parent_path().empty() ? fs::path(".") : checkout_dir.parent_path();
    KILN_TRY(TempDir temp,
             TempDir::create(parent, cat(".", checkout_dir.filename().string(), ".tmp-")));
    ::chmod(temp.path().c_str(), 0755);
    bool fetched = false;
    const Downloader& d = context_.downloader;
    KILN_TRY(std::int64_t deadline_s, git_deadline_seconds());
    GitOptions o{d.store(), d.offline(), d.max_bytes(), deadline_s};
    KILN_TRY(fs::path mirror,
             check_out(o, source_.url, source_.commit, source_.submodules, temp.path(), fetched));
    if (::rename(temp.path().c_str(), checkout_dir.c_str()) != 0)
      return Error::failed(cat("cannot rename ", temp.path().string(), " to ",
                               checkout_dir.string(), ": ", errno_text()));
    temp.release();
    KILN_TRY(std::string tree, tree_sha256(checkout_dir));
    return Fetched{checkout_dir, true, tree, fetched, mirror};
  }

 private:
  manifest::Source source_;
  Context& context_;
};

}  // namespace

std::unique_ptr<Source> make_git_source(const manifest::Source& source, Context& context) {
  return std::make_unique<GitSource>(source, context);
}

}  // namespace kiln::fetch
