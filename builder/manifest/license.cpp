#include "manifest/license.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/strings.h"

namespace kiln::manifest {

namespace {

#include "manifest/spdx_ids.inc"

template <std::size_t N>
bool listed(const char* const (&ids)[N], const std::string& id) {
  return std::binary_search(std::begin(ids), std::end(ids), id.c_str(),
                            [](const char* a, const char* b) { return std::strcmp(a, b) < 0; });
}

constexpr std::size_t kMaxExpressionBytes = 4096;
constexpr int kMaxDepth = 200;

// Lowercased tokens, parentheses padded with spaces as packaging does.
std::vector<std::string> tokens_of(std::string_view expression) {
  std::string padded;
  for (char c : expression) {
    if (c == '(' || c == ')')
      padded += cat(" ", std::string(1, c), " ");
    else
      padded += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  std::vector<std::string> out;
  for (auto& t : split(padded, " "))
    for (auto& u : split(t, "\t"))
      if (!u.empty()) out.push_back(u);
  return out;
}

bool is_operator(const std::string& t) {
  return t == "and" || t == "or" || t == "with" || t == "(" || t == ")";
}

// Names and operators in turn, balanced parentheses, ending with a name or a closed group.
bool syntax_ok(const std::vector<std::string>& tokens) {
  int depth = 0;
  bool expect_operand = true;
  for (const auto& t : tokens) {
    if (t == "(") {
      if (!expect_operand || depth >= kMaxDepth) return false;
      ++depth;
    } else if (t == ")") {
      if (expect_operand || depth == 0) return false;
      --depth;
    } else if (t == "and" || t == "or" || t == "with") {
      if (expect_operand) return false;
      expect_operand = true;
    } else {
      if (!expect_operand) return false;
      expect_operand = false;
    }
  }
  return !expect_operand && depth == 0;
}

// One license name (an SPDX id, maybe with "+", or LicenseRef-<[A-Za-z0-9.-]+>).
std::string name_problem(const std::string& token) {
  std::string id = token.ends_with('+') ? token.substr(0, token.size() - 1) : token;
  if (id.starts_with("licenseref-")) {
    std::string ref = id.substr(11);
    bool ok = id.size() == token.size() && !ref.empty() &&
              std::all_of(ref.begin(), ref.end(),
                          [](char c) { return is_ascii_alnum(c) || c == '.' || c == '-'; });
    return ok ? "" : cat("invalid LicenseRef '", printable_excerpt(token), "'");
  }
  return listed(kSpdxLicenses, id) ? ""
                                   : cat("unknown SPDX license '", printable_excerpt(token), "'");
}

}  // namespace

std::string license_expression_problem(std::string_view expression) {
  if (expression.size() > kMaxExpressionBytes)
    return cat("longer than ", kMaxExpressionBytes, " bytes");
  if (expression.find_first_of("\r\n") != std::string_view::npos) return "not one line";
  std::vector<std::string> tokens = tokens_of(expression);
  if (tokens.empty() || !syntax_ok(tokens))
    return "not an SPDX expression (license names joined by AND, OR, WITH and parentheses)";
  bool license_start = false;  // the previous token ended a license name
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (is_operator(t)) {
      if (t == "with" && (!license_start || i + 1 == tokens.size() || is_operator(tokens[i + 1])))
        return "WITH must join a license and an exception";
      license_start = false;
    } else if (i > 0 && tokens[i - 1] == "with") {
      if (!listed(kSpdxExceptions, t))
        return cat("unknown SPDX license exception '", printable_excerpt(t), "'");
      license_start = false;
    } else {
      if (auto problem = name_problem(t); !problem.empty()) return problem;
      license_start = true;
    }
  }
  return "";
}

}  // namespace kiln::manifest
