// Check "archive": a well-formed zip (strict reader), the dist-info layout, and RECORD listing
// every file exactly once with its urlsafe-base64 sha256 and size, and its own row empty.
#include <map>
#include <set>

#include "core/strings.h"
#include "manifest/version.h"
#include "validate/checks.h"

namespace kiln::validate {

namespace {

// RECORD is CSV as Python's csv module writes it: ',' separated, '"' quoting with "" escapes.
// Returns false (with the 1-based line) when a quoted field is not closed.
bool parse_csv(std::string_view text, std::vector<std::pair<std::size_t, std::vector<std::string>>>& rows,
               std::size_t& bad_line) {
  std::size_t line = 1, i = 0;
  while (i < text.size()) {
    std::vector<std::string> fields(1);
    std::size_t row_line = line;
    bool quoted = false, any = false;
    for (; i < text.size(); ++i) {
      char c = text[i];
      if (quoted) {
        if (c == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            fields.back() += '"';
            ++i;
          } else {
            quoted = false;
          }
        } else {
          if (c == '\n') ++line;
          fields.back() += c;
        }
        continue;
      }
      if (c == '"' && fields.back().empty()) {
        quoted = true;
        any = true;
      } else if (c == ',') {
        fields.emplace_back();
        any = true;
      } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
        continue;
      } else if (c == '\n') {
        ++line;
        ++i;
        break;
      } else {
        fields.back() += c;
        any = true;
      }
    }
    if (quoted) {
      bad_line = row_line;
      return false;
    }
    if (any) rows.emplace_back(row_line, std::move(fields));
  }
  return true;
}

bool is_signature_file(const std::string& dist_info, const std::string& name) {
  return name == dist_info + "/RECORD.jws" || name == dist_info + "/RECORD.p7s";
}

}  // namespace

CheckResult check_archive(const LoadedWheel& w) {
  Findings f("archive");
  if (!w.zip) {
    f.fail(w.zip_error);
    return f.finish("");
  }
  const auto& zip = *w.zip;
  f.data()["entries"] = zip.entries().size();

  // Layout: one .dist-info directory, named after the file name; nothing unexpected at the top.
  std::string want_info = cat(w.name.distribution, "-", w.name.version, ".dist-info");
  std::string want_data = cat(w.name.distribution, "-", w.name.version, ".data");
  std::set<std::string> infos, datas;
  for (const auto& e : zip.entries()) {
    if (e.is_symlink()) f.fail(cat("entry '", e.name, "' is a symbolic link (installers write it as a file)"));
    auto slash = e.name.find('/');
    if (slash == std::string::npos) continue;
    std::string top = e.name.substr(0, slash);
    auto ends = [&](const char* suffix) {
      std::string s = suffix;
      return top.size() > s.size() && top.compare(top.size() - s.size(), s.size(), s) == 0;
    };
    if (ends(".dist-info")) infos.insert(top);
    if (ends(".data")) {
      datas.insert(top);
      std::string rest = e.name.substr(slash + 1);
      std::string kind = rest.substr(0, rest.find('/'));
      static const std::set<std::string> kinds = {"purelib", "platlib", "headers", "scripts", "data"};
      if (!kinds.count(kind) && !e.is_directory())
        f.fail(cat("entry '", e.name, "' is in ", top, "/ but not under purelib, platlib, headers, scripts or data"));
    }
  }
  auto same_dir = [&](const std::string& found, const char* suffix) {
    // Installers compare the name normalised; the version must be the file name's.
    std::string s = suffix;
    std::string stem = found.substr(0, found.size() - s.size());
    auto dash = stem.rfind('-');
    if (dash == std::string::npos) return false;
    return manifest::wheel_name(stem.substr(0, dash)) == manifest::wheel_name(w.name.distribution) &&
           stem.substr(dash + 1) == w.name.version;
  };
  if (infos.empty()) {
    f.fail(cat("no .dist-info directory (expected ", want_info, "/)"));
  } else if (infos.size() > 1) {
    f.fail(cat("several .dist-info directories: ", join(std::vector<std::string>(infos.begin(), infos.end()), ", ")));
  } else if (!same_dir(*infos.begin(), ".dist-info")) {
    f.fail(cat("the .dist-info directory is ", *infos.begin(), "; the file name says ", want_info));
  }
  for (const auto& d : datas)
    if (!same_dir(d, ".data")) f.fail(cat("the .data directory is ", d, "; the file name says ", want_data));
  if (!w.dist_info.empty()) {
    for (const char* required : {"METADATA", "WHEEL", "RECORD"})
      if (!zip.find(cat(w.dist_info, "/", required))) f.fail(cat(w.dist_info, "/", required, " is missing"));
  }

  // Every entry must read back: sizes and CRCs against the central directory.
  std::map<std::string, const Member*> members;
  for (const auto& m : w.members) {
    members[m.name] = &m;
    if (!m.error.empty()) f.fail(m.error);
  }

  // RECORD.
  auto record_it = w.texts.find("RECORD");
  if (record_it != w.texts.end()) {
    const std::string record_name = cat(w.dist_info, "/RECORD");
    std::vector<std::pair<std::size_t, std::vector<std::string>>> rows;
    std::size_t bad_line = 0;
    if (!parse_csv(record_it->second, rows, bad_line)) {
      f.fail(cat("RECORD line ", bad_line, ": unterminated quoted field"));
    } else {
      std::map<std::string, std::size_t> listed;  // path -> line
      std::size_t checked = 0;
      for (const auto& [line, fields] : rows) {
        auto where = cat("RECORD line ", line);
        if (fields.size() != 3) {
          f.fail(cat(where, ": ", fields.size(), " fields instead of 3 (path,hash,size)"));
          continue;
        }
        const std::string& path = fields[0];
        const std::string& hash = fields[1];
        const std::string& size = fields[2];
        if (path.empty()) {
          f.fail(cat(where, ": empty path"));
          continue;
        }
        if (auto [it, fresh] = listed.emplace(path, line); !fresh) {
          f.fail(cat(where, ": ", path, " is listed twice (first on line ", it->second, ")"));
          continue;
        }
        if (path == record_name) {
          if (!hash.empty() || !size.empty()) f.fail(cat(where, ": RECORD's own row must have an empty hash and size"));
          continue;
        }
        auto m = members.find(path);
        if (m == members.end()) {
          f.fail(cat("RECORD lists ", path, ", which is not in the wheel"));
          continue;
        }
        if (!m->second->error.empty()) continue;  // reported above
        auto eq = hash.find('=');
        std::string algorithm = eq == std::string::npos ? hash : hash.substr(0, eq);
        if (hash.empty()) {
          f.fail(cat("RECORD has no hash for ", path));
        } else if (algorithm != "sha256") {
          if (algorithm == "md5" || algorithm == "sha1")
            f.fail(cat("RECORD hashes ", path, " with ", algorithm, ", which PEP 427 forbids"));
          else
            f.warn(cat("RECORD hashes ", path, " with ", algorithm, "; kiln checks sha256 only"));
        } else if (hash != m->second->record_hash) {
          f.fail(cat("sha256 of ", path, " does not match RECORD (RECORD: ", hash.substr(7), ", file: ",
                     m->second->record_hash.substr(7), ")"));
        } else {
          ++checked;
        }
        if (size != std::to_string(m->second->size))
          f.fail(cat("size of ", path, " does not match RECORD (RECORD: ", size.empty() ? "(none)" : size, ", file: ",
                     m->second->size, ")"));
      }
      if (!listed.count(record_name)) f.fail(cat("RECORD has no row for itself (", record_name, ",,)"));
      for (const auto& m : w.members)
        if (!listed.count(m.name) && !is_signature_file(w.dist_info, m.name))
          f.fail(cat(m.name, " is in the wheel but not in RECORD"));
      f.data()["record_rows"] = rows.size();
      f.data()["hashes_checked"] = checked;
    }
  }
  return f.finish(cat("zip intact (", zip.entries().size(), " entries, local headers agree with the central directory); "
                      "RECORD matches every file; ", w.dist_info, "/ complete"));
}

}  // namespace kiln::validate
