#define TOML_IMPLEMENTATION
#include "manifest/toml_reader.h"

#include <cstdio>
#include <sstream>

#include "core/strings.h"
#include "manifest/limits.h"

namespace kiln::manifest {

namespace {

std::string_view type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    default:
      return "nothing";
  }
}

Position position_of(const toml::source_region& region) {
  return Position{static_cast<int>(region.begin.line), static_cast<int>(region.begin.column)};
}

// The first C0 control character (NUL, newline, escape, …) or DEL in `value`, if any: no value
// of a manifest, a target or a configuration file holds one. A NUL would cut a path where the C
// library reads it (`cache = "/victim/\u0000"` named /victim/ to `kiln cache gc`); the others
// reach terminals, file names and printed commands.
std::optional<unsigned char> control_character(std::string_view value) {
  for (char c : value)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return static_cast<unsigned char>(c);
  return std::nullopt;
}

}  // namespace

toml::table parse_toml(const SourceText& source) {
  toml::parse_result result = toml::parse(source.text, source.path);
  if (!result) {
    const auto& err = result.error();
    std::string what(err.description());
    fail_at(source, position_of(err.source()), cat("TOML syntax error: ", what));
  }
  return std::move(result).table();
}

TableReader::TableReader(const SourceText& source, const toml::table& table, std::string name,
                         std::vector<std::string> known_keys)
    : source_(source), table_(table), name_(std::move(name)) {
  for (const auto& [key, value] : table_) {
    std::string k(key.str());
    bool known = false;
    for (const auto& candidate : known_keys) known = known || candidate == k;
    if (known) continue;
    std::string message = cat("unknown key '", qualified(k), "'");
    std::string suggestion = closest_match(k, known_keys);
    if (!suggestion.empty())
      message += cat(" (did you mean '", qualified(suggestion), "'?)");
    else if (!known_keys.empty())
      message += cat(" (expected one of: ", join(known_keys, ", "), ")");
    fail_at(source_, position_of(key.source()), message);
  }
}

std::string TableReader::qualified(std::string_view key) const {
  return name_.empty() ? std::string(key) : cat(name_, ".", key);
}

const toml::node* TableReader::node(std::string_view key) const {
  return table_.get(key);
}

bool TableReader::has(std::string_view key) const {
  return node(key) != nullptr;
}

Position TableReader::position(std::string_view key) const {
  const toml::node* n = node(key);
  return n ? position_of(n->source()) : position();
}

Position TableReader::position() const {
  Position p = position_of(table_.source());
  if (p.line <= 0) p = Position{1, 1};
  return p;
}

Position TableReader::element_position(std::string_view key, std::size_t index) const {
  const toml::node* n = node(key);
  if (n && n->is_array() && index < n->as_array()->size())
    return position_of((*n->as_array())[index].source());
  return position(key);
}

void TableReader::fail(std::string_view key, std::string_view message) const {
  fail_at(source_, position(key), message);
}

void TableReader::fail_missing(std::string_view key) const {
  std::string where = name_.empty() ? std::string("the file") : cat("[", name_, "]");
  fail_at(source_, position(), cat("missing required key '", qualified(key), "' in ", where));
}

void TableReader::wrong_type(std::string_view key, std::string_view wanted) const {
  fail(key, cat("'", qualified(key), "' must be ", wanted, ", not ", type_name(*node(key))));
}

void TableReader::check_length(std::string_view key, std::string_view value,
                               std::size_t max) const {
  if (value.size() > max) fail(key, cat("'", qualified(key), "' is longer than ", max, " bytes"));
}

void TableReader::check_lengths(std::string_view key, const std::vector<std::string>& values,
                                std::size_t max) const {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (values[i].size() > max)
      fail_at(source_, element_position(key, i),
              cat("an entry of '", qualified(key), "' is longer than ", max, " bytes"));
}

void TableReader::check_text(std::string_view key, std::string_view value, Position at) const {
  if (auto c = control_character(value)) {
    char code[8];
    std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(*c));
    fail_at(source_, at,
            cat("'", qualified(key), "' holds the control character ", code,
                " (no value here may hold one)"));
  }
}

std::optional<std::string> TableReader::string(std::string_view key) const {
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  if (!n->is_string()) wrong_type(key, "a string");
  check_length(key, n->as_string()->get(), kMaxStringBytes);
  check_text(key, n->as_string()->get(), position(key));
  return std::string(n->as_string()->get());
}

std::string TableReader::required_string(std::string_view key) const {
  auto value = string(key);
  if (!value) fail_missing(key);
  if (value->empty()) fail(key, cat("'", qualified(key), "' must not be empty"));
  return *value;
}

std::optional<bool> TableReader::boolean(std::string_view key) const {
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  if (!n->is_boolean()) wrong_type(key, "a boolean");
  return n->as_boolean()->get();
}

std::optional<std::int64_t> TableReader::integer(std::string_view key) const {
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  if (!n->is_integer()) wrong_type(key, "an integer");
  return n->as_integer()->get();
}

std::optional<std::vector<std::string>> TableReader::strings(std::string_view key) const {
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  if (!n->is_array()) wrong_type(key, "an array of strings");
  std::vector<std::string> out;
  for (const auto& element : *n->as_array()) {
    if (!element.is_string())
      fail_at(source_, position_of(element.source()),
              cat("'", qualified(key), "' must hold only strings, not ", type_name(element)));
    out.emplace_back(element.as_string()->get());
  }
  check_lengths(key, out, kMaxStringBytes);
  for (std::size_t i = 0; i < out.size(); ++i) check_text(key, out[i], element_position(key, i));
  return out;
}

const toml::table* TableReader::table(std::string_view key) const {
  const toml::node* n = node(key);
  if (!n) return nullptr;
  if (!n->is_table()) wrong_type(key, "a table");
  return n->as_table();
}

std::vector<const toml::table*> TableReader::tables(std::string_view key) const {
  const toml::node* n = node(key);
  std::vector<const toml::table*> out;
  if (!n) return out;
  if (!n->is_array()) wrong_type(key, "an array of tables");
  for (const auto& element : *n->as_array()) {
    if (!element.is_table())
      fail_at(source_, position_of(element.source()),
              cat("'", qualified(key), "' must hold only tables, not ", type_name(element)));
    out.push_back(element.as_table());
  }
  return out;
}

}  // namespace kiln::manifest
