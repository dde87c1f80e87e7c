// Puts a PackScanner (git_pack.h) in front of libgit2's indexer for every pack a fetch writes into
// a repository: an object database backend of kiln's, first in line, whose writepack hands each
// chunk to the scanner and then to the repository's own pack writer. A pack the scanner refuses
// stops the fetch before the indexer inflates anything big; libgit2 then removes its temporary
// pack file.
#pragma once

#include <git2.h>

#include <memory>
#include <string>

#include "core/expected.h"
#include "fetch/git_pack.h"

namespace kiln::fetch {

// What the guard saw: the scanner's refusal, if any (libgit2 reports only that the fetch failed).
struct PackGuardReport {
  std::string refused;
  std::uint64_t bytes = 0;
};

// Adds the guard to `repo`'s object database (for as long as `repo` is open); `report` must
// outlive the fetches.
Expected<void> guard_pack_writes(git_repository* repo, PackLimits limits,
                                 std::shared_ptr<PackGuardReport> report);

}  // namespace kiln::fetch
