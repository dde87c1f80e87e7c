// Which index answers for a project name: kiln itself for its own names, an upstream for the rest.
// One index URL then installs everything: pip and uv follow a temporary redirect to the upstream
// for torch and the pure dependencies, and never see the upstream's copy of a kiln project.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>

#include "core/expected.h"
#include "index/model.h"

namespace kiln::index {

// A target's own upstream: where torch comes from (its `[torch] index-url`), and the names that
// go there with it (torch and its pinned wheel's requirements, normalised).
struct TargetUpstream {
  std::string url;  // "" with names: the target's index was refused, so they are found nowhere
  std::set<std::string, std::less<>> names;  // empty when the target sets no index: the fallback
};

struct Routes {
  // Normalised names kiln always answers for itself (an empty page where a target has no files):
  // every manifest's name and kiln's own. Projects with wheels in the cache are added per request.
  std::set<std::string, std::less<>> own;
  // Where every other name goes (ends in '/'); "" answers 404 instead (`--no-fallback`).
  std::string fallback;
  // Targets known from the manifests directory, served even before the cache has wheels for them.
  std::map<std::string, TargetUpstream, std::less<>> targets;
  // What each of those targets declares (torch, CUDA, Python tags, archs), for "/" as JSON.
  std::map<std::string, TargetFacts, std::less<>> declared;

  // The upstream project page URL for a name that is not kiln's: "<upstream><name>/", or "" (no
  // upstream, or a name that is not a PEP 503 normalised project name of at most 200 bytes).
  std::string upstream_page(std::string_view target, std::string_view normalized_name) const;
};

// A PEP 503 normalised project name: [a-z0-9-], starting and ending with a letter or digit, at
// most 200 bytes. Only such names are redirected or given an empty page.
bool is_project_name(std::string_view normalized_name);

// An upstream index URL as kiln redirects to it: http(s), a host, no user info (it would be sent to
// every client), no query, fragment, whitespace or control characters; returned ending in '/'.
Expected<std::string> check_upstream_url(std::string_view url);

}  // namespace kiln::index
