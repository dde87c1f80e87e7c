// Reading doctor.py's report, whose every value may have any type (it comes from the interpreter
// `--python` names): a missing or mistyped value reads as empty, never as an exception.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::doctor {

inline std::string str(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

inline bool flag(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

inline const nlohmann::json& member(const nlohmann::json& j, const char* key) {
  static const nlohmann::json null;
  if (!j.is_object()) return null;
  auto it = j.find(key);
  return it != j.end() ? *it : null;
}

// A fast path's reasons as doctor.py gave them.
inline std::vector<std::string> path_reasons(const nlohmann::json& path) {
  std::vector<std::string> reasons;
  for (const auto& r : member(path, "reasons"))
    if (r.is_string()) reasons.push_back(r.get<std::string>());
  return reasons;
}

}  // namespace kiln::doctor
