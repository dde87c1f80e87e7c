// Upstream's own metadata: what a source distribution says of itself (its PKG-INFO, and the
// entry_points.txt of its *.egg-info), which kiln's wheels keep, and the comparison `kiln
// validate` makes between a wheel's METADATA and it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/expected.h"
#include "wheel/metadata.h"

namespace kiln::wheel {

struct UpstreamMetadata {
  std::string origin;  // "PKG-INFO", or "" when the tree has none (a git checkout, a local tree)
  std::vector<std::string> requires_dist;   // markers and extras as written
  std::vector<std::string> provides_extra;  // as written
  std::vector<std::string> classifiers;
  std::vector<std::string> project_urls;  // "Label, URL"
  std::string home_page, author, author_email, maintainer, maintainer_email, keywords;
  std::string entry_points;  // the text of *.egg-info/entry_points.txt ("" when none)
};

// Reads <tree>/PKG-INFO and <tree>/<one>.egg-info/entry_points.txt (plain files of bounded size,
// no links followed). A tree without PKG-INFO has an empty origin; an unreadable one fails.
Expected<UpstreamMetadata> read_upstream_metadata(const std::filesystem::path& tree);

// What kiln writes from upstream's metadata and a manifest's additions: upstream's Requires-Dist
// then each added requirement upstream lacks; its extras, classifiers (less "License ::" ones when
// License-Expression replaces them), URLs and people.
void apply_upstream(const UpstreamMetadata& upstream, const std::vector<std::string>& added,
                    CoreMetadata& md);

// How a wheel's METADATA differs from upstream's beyond what kiln adds on purpose: requirements
// (`added`; a bare torch requirement pinned to `torch_pin` when that is set), Provides-Extra and
// Classifier (License classifiers may go). One line per difference; empty when none.
std::vector<std::string> upstream_differences(const ParsedMetadata& wheel_md,
                                              const UpstreamMetadata& upstream,
                                              const std::vector<std::string>& added,
                                              const std::string& torch_pin);

}  // namespace kiln::wheel
