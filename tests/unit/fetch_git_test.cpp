// git sources: real repositories made with the git CLI in a temporary directory.
#include <gtest/gtest.h>

#include "../support/fake_http.h"
#include "../support/fetch_util.h"
#include "cache/store.h"
#include "core/hash.h"
#include "core/process.h"
#include "fetch/source.h"
#include "fetch/url.h"

#include "cache_layout.h"

using kiln::testing::layout;

namespace kiln::fetch {

using kiln::testing::FakeHttp;
using kiln::testing::ScopedEnv;
using kiln::testing::write_text;

class GitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (find_program("git").empty()) GTEST_SKIP() << "git is not installed";
    dir_.emplace(TempDir::create(fs::temp_directory_path(), "kiln-fetch-").value());
    cache_ = dir_->path() / "cache";
    store_ = cache::Store(cache_);
    repo_ = dir_->path() / "upstream";
    git(dir_->path(), {"init", "-q", "-b", "main", repo_.string()});
    write_text(repo_ / "a.txt", "first\n");
    write_text(repo_ / "bin" / "run.sh", "#!/bin/sh\necho hi\n");
    fs::permissions(repo_ / "bin" / "run.sh", fs::perms::owner_exec, fs::perm_options::add);
    fs::create_symlink("a.txt", repo_ / "link");
    first_ = commit(repo_, "first");
    write_text(repo_ / "a.txt", "second\n");
    second_ = commit(repo_, "second");
  }

  static std::string git(const fs::path& cwd, std::vector<std::string> args) {
    std::vector<std::string> argv = {"git",
                                     "-C",
                                     cwd.string(),
                                     "-c",
                                     "user.name=kiln",
                                     "-c",
                                     "user.email=kiln@example.invalid",
                                     "-c",
                                     "commit.gpgsign=false",
                                     "-c",
                                     "protocol.file.allow=always"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_capture(argv).value();
  }
  static std::string commit(const fs::path& repo, const std::string& message) {
    git(repo, {"add", "-A"});
    git(repo, {"commit", "-q", "-m", message});
    return std::string(trim(git(repo, {"rev-parse", "HEAD"})));
  }
  static manifest::Source pin(const std::string& url, const std::string& commit) {
    manifest::Source s;
    s.kind = manifest::Source::Kind::Git;
    s.url = url;
    s.commit = commit;
    return s;
  }

  std::optional<TempDir> dir_;
  fs::path cache_, repo_;
  cache::Store store_{fs::path()};  // the cache at cache_
  std::string first_, second_;
  FakeHttp http_;  // git never uses it
};

TEST_F(GitTest, ChecksOutExactlyThePinnedCommit) {
  Downloader d(http_, store_, false);
  Context ctx{d, ""};
  fs::path out = dir_->path() / "work" / "src";
  auto got = make_source(pin(repo_.string(), first_), ctx)->fetch(out).value();
  EXPECT_TRUE(got.is_directory);
  EXPECT_TRUE(got.downloaded);
  EXPECT_EQ(got.path, out);
  EXPECT_EQ(read_file(out / "a.txt").value(), "first\n");
  EXPECT_EQ(read_file(out / "bin" / "run.sh").value(), "#!/bin/sh\necho hi\n");
  EXPECT_NE(fs::status(out / "bin" / "run.sh").permissions() & fs::perms::owner_exec,
            fs::perms::none);
  EXPECT_EQ(fs::status(out / "a.txt").permissions() & fs::perms::owner_exec, fs::perms::none);
  ASSERT_TRUE(fs::is_symlink(out / "link"));
  EXPECT_EQ(fs::read_symlink(out / "link"), "a.txt");
  EXPECT_FALSE(fs::exists(out / ".git"));
  EXPECT_EQ(got.sha256, tree_sha256(out).value());
  EXPECT_TRUE(fs::exists(layout(store_).git_mirror(repo_.string()) / "HEAD"));
  // The mirror's name, as every kiln's: git/<sha256 of the URL>.
  EXPECT_EQ(layout(store_).git_mirror(repo_.string()), cache_ / "git" / sha256_hex(repo_.string()));
  // Nothing but the checkout beside it (the temporary directory is gone).
  EXPECT_EQ(
      kiln::testing::tree_listing(dir_->path() / "work"),
      (std::vector<std::string>{"src/", "src/a.txt", "src/bin/", "src/bin/run.sh", "src/link"}));

  // The other commit, through a file:// URL, has other content and another tree hash.
  auto second = make_source(pin("file://" + repo_.string(), second_), ctx)
                    ->fetch(dir_->path() / "two")
                    .value();
  EXPECT_EQ(read_file(dir_->path() / "two" / "a.txt").value(), "second\n");
  EXPECT_NE(second.sha256, got.sha256);
}

TEST_F(GitTest, MirrorServesLaterCheckoutsOffline) {
  {
    Downloader d(http_, store_, false);
    Context ctx{d, ""};
    make_source(pin(repo_.string(), first_), ctx)->fetch(dir_->path() / "one").value();
  }
  fs::remove_all(repo_);  // upstream gone: only the mirror can serve it
  Downloader offline(http_, store_, true);
  Context ctx{offline, ""};
  auto got = make_source(pin(repo_.string(), first_), ctx)->fetch(dir_->path() / "again").value();
  EXPECT_FALSE(got.downloaded);
  EXPECT_EQ(read_file(dir_->path() / "again" / "a.txt").value(), "first\n");
  // A commit the mirror lacks cannot be had offline.
  std::string other(40, 'b');
  auto missing = make_source(pin(repo_.string(), other), ctx)->fetch(dir_->path() / "three");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message,
            "commit " + other + " of " + repo_.string() +
                " is not in the git cache and --offline forbids fetching it");
  EXPECT_FALSE(fs::exists(dir_->path() / "three"));
}

TEST(GitFetchUrl, LongestPrefixReplacedAsGitInsteadOfDoes) {
  std::string spec =
      " https://github.com/=/srv/git/\thttps://github.com/Dao-AILab/=file:///m/dao/ ";
  EXPECT_EQ(git_fetch_url(spec, "https://github.com/Dao-AILab/x.git").value(),
            "file:///m/dao/x.git");
  EXPECT_EQ(git_fetch_url(spec, "https://github.com/other/y").value(), "/srv/git/other/y");
  EXPECT_EQ(git_fetch_url(spec, "https://gitlab.com/a/b").value(), "https://gitlab.com/a/b");
  EXPECT_EQ(git_fetch_url("", "https://github.com/a/b").value(), "https://github.com/a/b");
  for (const char* bad : {"https://github.com/", "=/srv/", "https://github.com/="}) {
    auto got = git_fetch_url(cat("a=b ", bad), "https://github.com/a/b");
    ASSERT_FALSE(got) << bad;
    EXPECT_EQ(got.error().message, cat("$KILN_GIT_MIRRORS: '", bad, "' is not PREFIX=REPLACEMENT"));
  }
}

// A source pinned to a host this machine cannot reach, served by a mirror: the checkout is the
// pinned commit's, the git cache is the source URL's, and a mirror without the commit fails.
TEST_F(GitTest, KilnGitMirrorsServeThePinnedCommit) {
  const std::string url = "https://git.invalid/org/upstream";
  Downloader d(http_, store_, false);
  Context ctx{d, ""};
  {
    ScopedEnv wrong("KILN_GIT_MIRRORS",
                    cat("https://git.invalid/org/=", cache_.string(), "/").c_str());
    auto got = make_source(pin(url, first_), ctx)->fetch(dir_->path() / "none");
    ASSERT_FALSE(got);
    EXPECT_NE(got.error().message.find(cat(url, " (mirror ", cache_.string(), "/upstream)")),
              std::string::npos)
        << got.error().message;
  }
  // Another repository at the mirror's place: it has no such commit.
  fs::path fork = dir_->path() / "forks" / "upstream";
  git(dir_->path(), {"init", "-q", "-b", "main", fork.string()});
  write_text(fork / "a.txt", "forged\n");
  commit(fork, "forged");
  {
    ScopedEnv forged("KILN_GIT_MIRRORS",
                     cat("https://git.invalid/org/=", fork.parent_path().string(), "/").c_str());
    auto got = make_source(pin(url, first_), ctx)->fetch(dir_->path() / "forged");
    ASSERT_FALSE(got);
    EXPECT_TRUE(got.error().message.starts_with(
        cat("commit ", first_, " not found in ", url, " (mirror ", fork.string(), ") (it did not")))
        << got.error().message;
    EXPECT_FALSE(fs::exists(dir_->path() / "forged"));
  }
  ScopedEnv mirrors("KILN_GIT_MIRRORS",
                    cat("https://git.invalid/org/=", dir_->path().string(), "/").c_str());
  auto got = make_source(pin(url, first_), ctx)->fetch(dir_->path() / "src").value();
  EXPECT_TRUE(got.downloaded);
  EXPECT_EQ(read_file(dir_->path() / "src" / "a.txt").value(), "first\n");
  EXPECT_TRUE(fs::exists(layout(store_).git_mirror(url) / "HEAD"));
  // The git cache is the URL's: offline, with no mirror, the commit is still there.
  ScopedEnv none("KILN_GIT_MIRRORS", nullptr);
  Downloader offline(http_, store_, true);
  Context offline_ctx{offline, ""};
  auto again = make_source(pin(url, first_), offline_ctx)->fetch(dir_->path() / "again").value();
  EXPECT_FALSE(again.downloaded);
  EXPECT_EQ(again.sha256, got.sha256);
}

TEST_F(GitTest, UnknownCommitIsAnError) {
  Downloader d(http_, store_, false);
  Context ctx{d, ""};
  std::string nope = "0123456789abcdef0123456789abcdef01234567";
  auto got = make_source(pin(repo_.string(), nope), ctx)->fetch(dir_->path() / "out");
  ASSERT_FALSE(got);
  EXPECT_TRUE(got.error().message.starts_with("commit " + nope + " not found in " + repo_.string() +
                                              " (it did not send that commit"))
      << got.error().message;
  // Nothing but the pinned commit was asked for: the failed fetch left no mirror, no branch.
  EXPECT_FALSE(fs::exists(layout(store_).git_mirror(repo_.string())));
  EXPECT_FALSE(fs::exists(dir_->path() / "out"));
  for (const auto& entry : fs::directory_iterator(dir_->path()))
    EXPECT_EQ(entry.path().filename().string().find(".out.tmp-"), std::string::npos);

  auto bad = make_source(pin(repo_.string(), "HEAD"), ctx)->fetch(dir_->path() / "out");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::BadInput);
  auto unreachable =
      make_source(pin(dir_->path() / "no-such-repo", first_), ctx)->fetch(dir_->path() / "out");
  ASSERT_FALSE(unreachable);
  EXPECT_EQ(unreachable.error().message.rfind(
                "cannot fetch " + (dir_->path() / "no-such-repo").string() + ": ", 0),
            0u)
      << unreachable.error().message;
}

TEST_F(GitTest, RefusesANonEmptyCheckoutDirectory) {
  Downloader d(http_, store_, false);
  Context ctx{d, ""};
  write_text(dir_->path() / "busy" / "keep.txt", "mine");
  auto got = make_source(pin(repo_.string(), first_), ctx)->fetch(dir_->path() / "busy");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().message, "cannot check out " + repo_.string() + " into " +
                                     (dir_->path() / "busy").string() + ": it already exists");
  EXPECT_EQ(read_file(dir_->path() / "busy" / "keep.txt").value(), "mine");
  fs::create_directories(dir_->path() / "empty");
  EXPECT_TRUE(make_source(pin(repo_.string(), first_), ctx)->fetch(dir_->path() / "empty"));
}

TEST_F(GitTest, SubmodulesOnlyWhenListed) {
  fs::path sub = dir_->path() / "sub";
  git(dir_->path(), {"init", "-q", "-b", "main", sub.string()});
  write_text(sub / "kernel.cu", "__global__ void k() {}\n");
  commit(sub, "sub");
  git(repo_, {"submodule", "add", "-q", sub.string(), "third_party/sub"});
  std::string with_sub = commit(repo_, "add a submodule");

  Downloader d(http_, store_, false);
  Context ctx{d, ""};
  auto plain =
      make_source(pin(repo_.string(), with_sub), ctx)->fetch(dir_->path() / "plain").value();
  EXPECT_TRUE(fs::is_directory(dir_->path() / "plain" / "third_party" / "sub"));
  EXPECT_TRUE(fs::is_empty(dir_->path() / "plain" / "third_party" / "sub"));

  auto with = pin(repo_.string(), with_sub);
  with.submodules = {"third_party/sub"};
  auto full = make_source(with, ctx)->fetch(dir_->path() / "full").value();
  EXPECT_EQ(read_file(dir_->path() / "full" / "third_party" / "sub" / "kernel.cu").value(),
            "__global__ void k() {}\n");
  EXPECT_NE(full.sha256, plain.sha256);

  with.submodules = {"nope"};
  auto wrong = make_source(with, ctx)->fetch(dir_->path() / "wrong");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().message,
            "'nope' is not a submodule of " + repo_.string() + " at commit " + with_sub);
  EXPECT_FALSE(fs::exists(dir_->path() / "wrong"));
}

// A crafted tree (git's own tools refuse to make one) with entries that would leave the checkout.
TEST_F(GitTest, HostileTreeEntriesAreRejected) {
  fs::path evil = dir_->path() / "evil";
  git(dir_->path(), {"init", "-q", "-b", "main", evil.string()});
  write_text(dir_->path() / "payload", "pwned\n");
  std::string blob =
      std::string(trim(git(evil, {"hash-object", "-w", (dir_->path() / "payload").string()})));
  std::string raw;
  for (std::size_t i = 0; i < blob.size(); i += 2)
    raw += static_cast<char>(std::stoi(blob.substr(i, 2), nullptr, 16));
  Downloader d(http_, store_, false);
  Context ctx{d, ""};
  for (std::string name : {"../escaped", ".git", ".."}) {
    write_text(dir_->path() / "tree.bin", "100644 " + name + std::string(1, '\0') + raw);
    std::string tree = std::string(trim(git(evil, {"hash-object", "-w", "-t", "tree", "--literally",
                                                   (dir_->path() / "tree.bin").string()})));
    std::string c = std::string(trim(git(evil, {"commit-tree", tree, "-m", "evil"})));
    git(evil, {"update-ref", "refs/heads/main", c});
    auto got = make_source(pin(evil.string(), c), ctx)->fetch(dir_->path() / "out" / "src");
    ASSERT_FALSE(got) << name;
    EXPECT_EQ(got.error().message,
              "commit " + c + " of " + evil.string() + " has an unsafe path '" + name + "'");
    EXPECT_FALSE(fs::exists(dir_->path() / "out" / "escaped"));
    EXPECT_FALSE(fs::exists(dir_->path() / "out" / "src"));
    EXPECT_TRUE(!fs::exists(dir_->path() / "out") || fs::is_empty(dir_->path() / "out")) << name;
  }
}

}  // namespace kiln::fetch
