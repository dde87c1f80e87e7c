// `kiln index export DIR`: the served index as static files for any web server or object store.
#pragma once

#include <cstdint>
#include <filesystem>

#include "core/expected.h"
#include "index/model.h"

namespace kiln::index {

struct ExportOptions {
  bool copy = false;  // copy wheels even where a hard link to the cache would do
};

struct ExportResult {
  std::size_t targets = 0, projects = 0, files = 0;
  std::size_t linked = 0, copied = 0;  // wheels hard-linked from the cache / copied
};

// Layout (hrefs are relative, so the tree can live under any URL prefix):
//   DIR/index.html                                   the targets
//   DIR/<target>/simple/index.html, index.json       the projects (PEP 503 / PEP 691)
//   DIR/<target>/simple/<project>/index.html, index.json
//   DIR/<target>/simple/<project>/<wheel>, <wheel>.metadata
//   DIR/.kiln-index                                  marks the tree as an export kiln may replace
// Written into a temporary directory beside DIR and renamed into place; an existing export is
// swapped atomically (renameat2 RENAME_EXCHANGE) and then removed. An existing DIR that is neither
// empty nor an export is refused. Wheels are hard links into the cache where possible.
Expected<ExportResult> export_index(const IndexModel& model, const std::filesystem::path& dir,
                                    const ExportOptions& options = {});

}  // namespace kiln::index
