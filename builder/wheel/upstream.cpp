#include "wheel/upstream.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/fs.h"
#include "core/strings.h"
#include "manifest/requirement.h"

namespace kiln::wheel {

namespace {

constexpr std::uint64_t kMaxPkgInfo = 16u << 20;     // a README can be long
constexpr std::uint64_t kMaxEntryPoints = 1u << 20;  // a list of names

// A plain file's text; nullopt when there is none (or it is a link or not a file).
Expected<std::optional<std::string>> plain_file(const fs::path& path, std::uint64_t max) {
  std::error_code ec;
  auto st = fs::symlink_status(path, ec);
  if (ec || st.type() != fs::file_type::regular) return std::optional<std::string>();
  KILN_TRY(std::string text, read_file(path, max));
  if (!is_valid_utf8(text))
    return Error::bad_input(cat(path.filename().string(), " of the sources is not UTF-8"));
  return std::optional<std::string>(std::move(text));
}

// The one *.egg-info directory at the top of the tree ("" when none or several).
fs::path egg_info(const fs::path& tree) {
  fs::path found;
  int count = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(tree, ec)) {
    if (entry.path().extension() != ".egg-info" || !entry.is_directory(ec) || entry.is_symlink(ec))
      continue;
    found = entry.path();
    ++count;
  }
  return count == 1 ? found : fs::path();
}

bool is_license_classifier(const std::string& c) {
  return c.starts_with("License ::");
}

// A requirement as compared: without spaces (`transformers<6, >=5.6.2` and
// `transformers<6,>=5.6.2` are one requirement).
std::string compact(const std::string& r) {
  std::string out;
  for (char c : r)
    if (c != ' ' && c != '\t') out += c;
  return out;
}

bool is_bare_torch(const std::string& r) {
  return manifest::requirement_name(r) == "torch" && r.find(';') == std::string::npos;
}

// What each side has more often than the other, one line per value, compared by `key` and named
// as first written.
template <typename Key>
void diff_lists(std::string_view what, const std::vector<std::string>& have,
                const std::vector<std::string>& want, Key key, std::vector<std::string>& out) {
  std::map<std::string, std::pair<int, std::string>> count;  // key -> (have - want, a spelling)
  for (const auto& x : want) count.emplace(key(x), std::pair{0, x}).first->second.first--;
  for (const auto& x : have) count.emplace(key(x), std::pair{0, x}).first->second.first++;
  for (const auto& [k, c] : count)
    if (c.first < 0) out.push_back(cat(what, " '", c.second, "' of the sdist is missing"));
  for (const auto& [k, c] : count)
    if (c.first > 0) out.push_back(cat(what, " '", c.second, "' is not the sdist's"));
}

std::string same(const std::string& s) {
  return s;
}

}  // namespace

Expected<UpstreamMetadata> read_upstream_metadata(const fs::path& tree) {
  UpstreamMetadata up;
  KILN_TRY(auto pkg_info, plain_file(tree / "PKG-INFO", kMaxPkgInfo));
  if (!pkg_info) return up;
  ParsedMetadata md = parse_metadata(*pkg_info);
  up.origin = "PKG-INFO";
  up.requires_dist = md.all("Requires-Dist");
  up.provides_extra = md.all("Provides-Extra");
  up.classifiers = md.all("Classifier");
  up.project_urls = md.all("Project-URL");
  up.home_page = md.first("Home-page");
  up.author = md.first("Author");
  up.author_email = md.first("Author-email");
  up.maintainer = md.first("Maintainer");
  up.maintainer_email = md.first("Maintainer-email");
  up.keywords = md.first("Keywords");
  if (fs::path info = egg_info(tree); !info.empty()) {
    KILN_TRY(auto entry_points, plain_file(info / "entry_points.txt", kMaxEntryPoints));
    if (entry_points) up.entry_points = std::move(*entry_points);
  }
  return up;
}

void apply_upstream(const UpstreamMetadata& upstream, const std::vector<std::string>& added,
                    CoreMetadata& md) {
  md.requires_dist = upstream.requires_dist;
  std::set<std::string> have;
  for (const auto& r : md.requires_dist) have.insert(compact(r));
  for (const auto& r : added)
    if (have.insert(compact(r)).second) md.requires_dist.push_back(r);
  md.provides_extra = upstream.provides_extra;
  for (const auto& c : upstream.classifiers)
    if (md.license_expression.empty() || !is_license_classifier(c)) md.classifiers.push_back(c);
  md.project_urls = upstream.project_urls;
  if (!upstream.home_page.empty()) md.home_page = upstream.home_page;
  md.author = upstream.author;
  md.author_email = upstream.author_email;
  md.maintainer = upstream.maintainer;
  md.maintainer_email = upstream.maintainer_email;
  md.keywords = upstream.keywords;
}

std::vector<std::string> upstream_differences(const ParsedMetadata& wheel_md,
                                              const UpstreamMetadata& upstream,
                                              const std::vector<std::string>& added,
                                              const std::string& torch_pin) {
  std::vector<std::string> have, want;
  bool pinned = false;
  for (const auto& r : wheel_md.all("Requires-Dist"))
    if (!pinned && !torch_pin.empty() && compact(r) == compact(torch_pin))
      pinned = true;  // kiln's pin, in place of upstream's bare torch or added
    else
      have.push_back(r);
  std::set<std::string> wanted;
  for (const auto& r : upstream.requires_dist)
    if (!(pinned && is_bare_torch(r)) && wanted.insert(compact(r)).second) want.push_back(r);
  for (const auto& r : added)
    if (!(pinned && is_bare_torch(r)) && wanted.insert(compact(r)).second) want.push_back(r);
  std::vector<std::string> out;
  diff_lists("Requires-Dist", have, want, compact, out);
  // Extras: upstream's, and those the markers of kiln's added requirements name.
  std::vector<std::string> extras = upstream.provides_extra;
  CoreMetadata added_only;
  added_only.requires_dist = added;
  for (const auto& e : parse_metadata(added_only.render()).all("Provides-Extra"))
    if (std::find(extras.begin(), extras.end(), e) == extras.end()) extras.push_back(e);
  std::vector<std::string> have_extras;
  for (const auto& e : wheel_md.all("Provides-Extra"))
    if (std::find(have_extras.begin(), have_extras.end(), e) == have_extras.end())
      have_extras.push_back(e);
  diff_lists("Provides-Extra", have_extras, extras, same, out);
  std::vector<std::string> classifiers;
  const bool expression = !wheel_md.first("License-Expression").empty();
  for (const auto& c : upstream.classifiers)
    if (!expression || !is_license_classifier(c)) classifiers.push_back(c);
  diff_lists("Classifier", wheel_md.all("Classifier"), classifiers, same, out);
  return out;
}

}  // namespace kiln::wheel
