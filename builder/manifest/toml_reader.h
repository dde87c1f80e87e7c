// Strict reading of TOML tables: unknown keys ("did you mean"), wrong types and missing fields are
// errors that point at the offending place. Only manifest/ includes toml++.
#pragma once

#include <cstdint>

#include <toml++/toml.h>

#include <optional>
#include <string>
#include <vector>

#include "manifest/diagnostic.h"

namespace kiln::manifest {

Position position_of(const toml::source_region& region);

// Parses TOML text; a syntax error becomes a located error.
toml::table parse_toml(const SourceText& source);

class TableReader {
 public:
  // `name` is the table's dotted name for messages ("" for the root).
  TableReader(const SourceText& source, const toml::table& table, std::string name,
              std::vector<std::string> known_keys);

  bool has(std::string_view key) const;
  std::optional<std::string> string(std::string_view key) const;
  std::string required_string(std::string_view key) const;
  std::optional<bool> boolean(std::string_view key) const;
  std::optional<std::int64_t> integer(std::string_view key) const;
  std::optional<std::vector<std::string>> strings(std::string_view key) const;
  const toml::table* table(std::string_view key) const;
  std::vector<const toml::table*> tables(std::string_view key) const;  // array of tables
  Position position(std::string_view key) const;                       // of the value
  Position position() const;                                           // of the table
  // Position of the i-th element of an array value.
  Position element_position(std::string_view key, std::size_t index) const;
  [[noreturn]] void fail(std::string_view key, std::string_view message) const;
  [[noreturn]] void fail_missing(std::string_view key) const;

  const SourceText& source() const { return source_; }
  std::string qualified(std::string_view key) const;

 private:
  const toml::node* node(std::string_view key) const;
  [[noreturn]] void wrong_type(std::string_view key, std::string_view wanted) const;

  const SourceText& source_;
  const toml::table& table_;
  std::string name_;
};

}  // namespace kiln::manifest
