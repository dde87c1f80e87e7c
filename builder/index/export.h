// `kiln index export DIR`: the served index as static files for any web server or object store.
#pragma once

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>

#include "core/expected.h"
#include "index/model.h"

namespace kiln::index {

struct ExportOptions {
  bool copy = false;  // copy wheels even where a hard link to the cache would do
  // kiln's own names (normalised): each gets an empty project page in every target without files
  // for it, as `kiln serve` answers (projects of any target of the model are added).
  std::set<std::string, std::less<>> own;
};

struct ExportResult {
  std::size_t targets = 0, projects = 0, files = 0;
  std::size_t linked = 0, copied = 0;  // wheels hard-linked from the cache / copied
  std::size_t empty = 0;               // empty project pages of kiln's own names
};

// Layout (hrefs are relative, so the tree can live under any URL prefix):
//   DIR/index.html                                   the targets
//   DIR/<target>/simple/index.html, index.json       the projects (PEP 503 / PEP 691)
//   DIR/<target>/simple/<project>/index.html, index.json
//   DIR/<target>/simple/<project>/<wheel>, <wheel>.metadata
//   DIR/<target>/simple/<own name>/index.html, index.json    empty: kiln's name, no files here
//   DIR/.kiln-index                                  marks the tree as an export kiln may replace
// Written into a temporary directory beside DIR and renamed into place; an existing export is
// swapped atomically (renameat2 RENAME_EXCHANGE) and then removed. An existing DIR that is neither
// empty nor an export is refused. Wheels are hard links into the cache where possible.
Expected<ExportResult> export_index(const IndexModel& model, const std::filesystem::path& dir,
                                    const ExportOptions& options = {});

}  // namespace kiln::index
