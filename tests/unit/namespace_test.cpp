#include "core/namespace.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <thread>

#include "core/fs.h"
#include "core/strings.h"

namespace kiln {
namespace {

// Runs `body` in a forked child (the namespace is for good); its exit code: 0 fine, 77 when the
// namespace is not allowed here, anything else a failed check (the line number).
int in_child(const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define CHILD_CHECK(cond) \
  if (!(cond)) return __LINE__ % 200 + 1

TEST(Namespace, PrivateTmpShowsTheSourceAndTheRealEntriesAndWritesNothingOutside) {
  auto real = TempDir::create("/tmp", "kiln-ns-real-").value();  // an entry of the real /tmp
  std::ofstream(real.path() / "inside.txt") << "real\n";
  auto source = TempDir::create(fs::temp_directory_path(), "kiln-ns-src-").value();
  const std::string name = cat("kiln-ns-test-", ::getpid());
  const fs::path stray = cat("/tmp/kiln-ns-stray-", ::getpid());
  ::symlink("/nonexistent-target", ("/tmp/" + name + "-link").c_str());
  const fs::path cwd = fs::current_path();
  int rc = in_child([&] {
    auto entered = enter_private_tmp(name, source.path());
    if (!entered) return 77;
    // The source at /tmp/<name>, both ways.
    std::ofstream(fs::path("/tmp") / name / "made-here") << "x";
    CHILD_CHECK(fs::exists(source.path() / "made-here"));
    // The real /tmp's entries, with their real contents, writable through.
    auto inside = read_file(real.path() / "inside.txt");
    CHILD_CHECK(inside && *inside == "real\n");
    std::ofstream(real.path() / "written-inside") << "y";
    CHILD_CHECK(fs::read_symlink("/tmp/" + name + "-link") == "/nonexistent-target");
    // A new entry of /tmp stays in the private /tmp.
    std::ofstream(stray) << "z";
    CHILD_CHECK(fs::exists(stray));
    CHILD_CHECK(fs::current_path() == cwd);  // entered again by its path
    return 0;
  });
  ::unlink(("/tmp/" + name + "-link").c_str());
  if (rc == 77) GTEST_SKIP() << "no private mount namespace here";
  ASSERT_EQ(rc, 0) << "a check in the child failed (line % 200 + 1)";
  EXPECT_TRUE(fs::exists(source.path() / "made-here"));
  EXPECT_TRUE(fs::exists(real.path() / "written-inside"));
  EXPECT_FALSE(fs::exists(stray));                    // nothing new in the real /tmp
  EXPECT_FALSE(fs::exists(fs::path("/tmp") / name));  // not even the mount point
}

TEST(Namespace, RefusesWithThreadsOrABadName) {
  auto source = TempDir::create(fs::temp_directory_path(), "kiln-ns-src-").value();
  EXPECT_FALSE(enter_private_tmp("a/b", source.path()));
  EXPECT_FALSE(enter_private_tmp("..", source.path()));
  int rc = in_child([&] {
    std::thread sleeper([] { ::sleep(2); });
    auto entered = enter_private_tmp("kiln-ns-threads", source.path());
    sleeper.detach();
    return !entered && entered.error().message.find("threads") != std::string::npos ? 0 : 1;
  });
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace kiln
