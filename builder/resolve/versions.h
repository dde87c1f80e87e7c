// What `kiln resolve --all-versions` resolves: every manifest version its arguments select, and
// every target of the manifests directory that loads here.
#pragma once

#include <string>
#include <vector>

#include "core/expected.h"
#include "manifest/repository.h"

namespace kiln::resolve {

// Every manifest ("name==version", with the local label an argument names) of the named packages
// (NAME, NAME==VERSION or NAME with specifiers) that their specifiers match, as pip filters
// versions (default: of every package but test fixtures); a manifest that failed to load is named
// on stderr and left out. An unknown package is an error naming the nearest.
Expected<std::vector<std::string>> every_version(const manifest::Repository& repo,
                                                 const std::vector<std::string>& names);

// Every target of the manifests directory that loads here; the others are named on stderr.
std::vector<std::string> loadable_targets(const manifest::Repository& repo);

}  // namespace kiln::resolve
