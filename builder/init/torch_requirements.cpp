#include "init/torch_requirements.h"

#include "cache/store.h"
#include "core/strings.h"
#include "fetch/url.h"
#include "init/requirements.h"
#include "packaging/name.h"
#include "wheel/metadata.h"
#include "wheel/reader.h"

namespace kiln::init {

std::set<std::string, std::less<>> torch_requirement_names(const cache::Store& store,
                                                           const manifest::TorchWheel& w) {
  std::set<std::string, std::less<>> names;
  if (w.sha256.size() != 64 || !fetch::is_safe_filename(w.file)) return names;
  auto path = store.downloaded(w.sha256, w.file);
  if (!path) return names;
  auto metadata = wheel::read_wheel_file(*path, [](std::string_view member) {
    auto slash = member.find('/');
    return slash != std::string_view::npos && member.substr(0, slash).ends_with(".dist-info") &&
           member.substr(slash + 1) == "METADATA";
  });
  if (!metadata || !*metadata) return names;
  for (const auto& value : wheel::parse_metadata(**metadata).all("Requires-Dist")) {
    auto req = parse_requirement(value);
    if (req && req->marker_extra().empty()) names.insert(packaging::normalize_name(req->name));
  }
  return names;
}

}  // namespace kiln::init
