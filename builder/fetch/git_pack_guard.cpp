#include "fetch/git_pack_guard.h"

#include <git2/sys/odb_backend.h>

#include "core/strings.h"

namespace kiln::fetch {

namespace {

// The priority of kiln's backend: above libgit2's loose (1) and packed (2) ones, so that
// git_odb_write_pack asks it first.
constexpr int kGuardPriority = 100;

struct Guard {
  git_odb_backend parent;
  git_odb_backend* writer = nullptr;  // the database's own pack writer (the database owns it)
  PackLimits limits;
  std::shared_ptr<PackGuardReport> report;
};

struct GuardedPack {
  git_odb_writepack parent;
  git_odb_writepack* inner = nullptr;
  PackScanner scanner;
  std::shared_ptr<PackGuardReport> report;
  GuardedPack(PackLimits limits, std::shared_ptr<PackGuardReport> r)
      : scanner(limits), report(std::move(r)) {}
};

int refuse(GuardedPack& pack, const Error& error) {
  pack.report->refused = error.message;
  git_error_set_str(GIT_ERROR_ODB, error.message.c_str());
  return -1;
}

int guarded_append(git_odb_writepack* w, const void* data, size_t size,
                   git_indexer_progress* stats) {
  auto* pack = reinterpret_cast<GuardedPack*>(w);
  auto fed = pack->scanner.feed(std::string_view(static_cast<const char*>(data), size));
  pack->report->bytes = pack->scanner.bytes();
  if (!fed) return refuse(*pack, fed.error());
  return pack->inner->append(pack->inner, data, size, stats);
}

int guarded_commit(git_odb_writepack* w, git_indexer_progress* stats) {
  auto* pack = reinterpret_cast<GuardedPack*>(w);
  if (auto done = pack->scanner.finish(); !done) return refuse(*pack, done.error());
  return pack->inner->commit(pack->inner, stats);
}

void guarded_free(git_odb_writepack* w) {
  auto* pack = reinterpret_cast<GuardedPack*>(w);
  if (pack->inner) pack->inner->free(pack->inner);
  delete pack;
}

// The database's own pack writer: the first backend that has one (found before kiln's is added:
// git_odb_write_pack calls writepack with the database's lock held, which listing would take).
git_odb_backend* pack_writer(git_odb* odb) {
  for (std::size_t i = 0; i < git_odb_num_backends(odb); ++i) {
    git_odb_backend* b = nullptr;
    if (git_odb_get_backend(&b, odb, i) == 0 && b->writepack) return b;
  }
  return nullptr;
}

int guard_writepack(git_odb_writepack** out, git_odb_backend* backend, git_odb* odb,
                    git_indexer_progress_cb progress_cb, void* progress_payload) {
  auto* guard = reinterpret_cast<Guard*>(backend);
  git_odb_backend* writer = guard->writer;
  auto pack = std::make_unique<GuardedPack>(guard->limits, guard->report);
  if (int rc = writer->writepack(&pack->inner, writer, odb, progress_cb, progress_payload); rc < 0)
    return rc;
  pack->parent.backend = backend;
  pack->parent.append = guarded_append;
  pack->parent.commit = guarded_commit;
  pack->parent.free = guarded_free;
  *out = &pack.release()->parent;
  return 0;
}

void guard_free(git_odb_backend* backend) {
  delete reinterpret_cast<Guard*>(backend);
}

}  // namespace

Expected<void> guard_pack_writes(git_repository* repo, PackLimits limits,
                                 std::shared_ptr<PackGuardReport> report) {
  git_odb* odb = nullptr;
  if (git_repository_odb(&odb, repo) != 0)
    return Error::failed("cannot open the git mirror's object database");
  auto guard = std::make_unique<Guard>();
  guard->writer = pack_writer(odb);
  if (!guard->writer) {
    git_odb_free(odb);
    return Error::failed("the git mirror's object database has no pack writer");
  }
  git_odb_init_backend(&guard->parent, GIT_ODB_BACKEND_VERSION);
  guard->parent.writepack = guard_writepack;
  guard->parent.free = guard_free;
  guard->limits = limits;
  guard->report = std::move(report);
  int rc = git_odb_add_backend(odb, &guard->parent, kGuardPriority);
  git_odb_free(odb);  // the repository keeps its database, and the database its backends
  if (rc != 0) return Error::failed("cannot guard the git mirror's object database");
  guard.release();
  return {};
}

}  // namespace kiln::fetch
