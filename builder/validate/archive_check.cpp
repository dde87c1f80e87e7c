// Check "archive": a well-formed zip (strict reader), the dist-info layout, and RECORD listing
// every file exactly once with its urlsafe-base64 sha256 and size, and its own row empty.
#include <map>
#include <set>

#include "core/strings.h"
#include "manifest/version.h"
#include "validate/checks.h"

namespace kiln::validate {

namespace {

// Python's str.splitlines() over UTF-8 text: lines end at \n, \r, \r\n, \v, \f, \x1c, \x1d,
// \x1e, U+0085, U+2028 and U+2029, which are not part of the lines.
std::vector<std::string_view> python_splitlines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0, i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    std::size_t length = 0;  // of the line break at i
    if (c == '\r')
      length = i + 1 < text.size() && text[i + 1] == '\n' ? 2 : 1;
    else if (c == '\n' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e)
      length = 1;
    else if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) == 0x85)
      length = 2;
    else if (c == 0xe2 && i + 2 < text.size() && static_cast<unsigned char>(text[i + 1]) == 0x80 &&
             (static_cast<unsigned char>(text[i + 2]) == 0xa8 ||
              static_cast<unsigned char>(text[i + 2]) == 0xa9))
      length = 3;
    if (length == 0) {
      ++i;
      continue;
    }
    lines.push_back(text.substr(start, i - start));
    i += length;
    start = i;
  }
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

// RECORD as installers read it: pip parses `csv.reader(text.splitlines())`, so this follows
// CPython's csv reader (excel dialect, not strict) over those lines: a quoted field goes on over
// a line break, which it drops; a quote after a closing quote is kept literally. Each row comes
// with the 1-based line it starts on.
std::vector<std::pair<std::size_t, std::vector<std::string>>> parse_record(std::string_view text) {
  enum State { StartRecord, StartField, InField, InQuoted, QuoteInQuoted };
  std::vector<std::pair<std::size_t, std::vector<std::string>>> rows;
  std::vector<std::string> fields;
  std::string field;
  State state = StartRecord;
  std::size_t row_line = 0;
  auto save = [&] { fields.push_back(std::exchange(field, {})); };
  const auto lines = python_splitlines(text);
  for (std::size_t n = 0; n < lines.size(); ++n) {
    if (state == StartRecord) row_line = n + 1;
    for (char c : lines[n]) {
      switch (state) {
        case StartRecord:
        case StartField:
          if (c == '"')
            state = InQuoted;
          else if (c == ',')
            save(), state = StartField;
          else
            field += c, state = InField;
          break;
        case InField:
          if (c == ',')
            save(), state = StartField;
          else
            field += c;
          break;
        case InQuoted:
          if (c == '"')
            state = QuoteInQuoted;
          else
            field += c;
          break;
        case QuoteInQuoted:
          if (c == '"')
            field += c, state = InQuoted;
          else if (c == ',')
            save(), state = StartField;
          else
            field += c, state = InField;
          break;
      }
    }
    // The end of the line.
    if (state == InQuoted) continue;  // the quoted field goes on in the next line
    if (state != StartRecord) save();
    rows.emplace_back(row_line, std::exchange(fields, {}));
    state = StartRecord;
  }
  if (state == InQuoted) {  // the end of the data inside a quoted field: what was read is a row
    save();
    rows.emplace_back(row_line, std::move(fields));
  }
  return rows;
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
    if (e.is_symlink())
      f.fail(cat("entry '", e.name, "' is a symbolic link (installers write it as a file)"));
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
      static const std::set<std::string> kinds = {"purelib", "platlib", "headers", "scripts",
                                                  "data"};
      if (!kinds.count(kind) && !e.is_directory())
        f.fail(cat("entry '", e.name, "' is in ", top,
                   "/ but not under purelib, platlib, headers, scripts or data"));
    }
  }
  auto same_dir = [&](const std::string& found, const char* suffix) {
    // Installers compare the name normalised; the version must be the file name's.
    std::string s = suffix;
    std::string stem = found.substr(0, found.size() - s.size());
    auto dash = stem.rfind('-');
    if (dash == std::string::npos) return false;
    return manifest::wheel_name(stem.substr(0, dash)) ==
               manifest::wheel_name(w.name.distribution) &&
           stem.substr(dash + 1) == w.name.version;
  };
  if (infos.empty()) {
    f.fail(cat("no .dist-info directory (expected ", want_info, "/)"));
  } else if (infos.size() > 1) {
    f.fail(cat("several .dist-info directories: ",
               join(std::vector<std::string>(infos.begin(), infos.end()), ", ")));
  } else if (!same_dir(*infos.begin(), ".dist-info")) {
    f.fail(cat("the .dist-info directory is ", *infos.begin(), "; the file name says ", want_info));
  }
  for (const auto& d : datas)
    if (!same_dir(d, ".data"))
      f.fail(cat("the .data directory is ", d, "; the file name says ", want_data));
  if (!w.dist_info.empty()) {
    for (const char* required : {"METADATA", "WHEEL", "RECORD"})
      if (!zip.find(cat(w.dist_info, "/", required)))
        f.fail(cat(w.dist_info, "/", required, " is missing"));
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
    if (!is_valid_utf8(record_it->second)) f.fail("RECORD is not valid UTF-8");
    const auto rows = parse_record(record_it->second);
    std::map<std::string, std::size_t> listed;  // path -> line
    std::size_t checked = 0;
    for (const auto& [line, fields] : rows) {
      auto where = cat("RECORD line ", line);
      if (fields.empty()) {
        f.fail(cat(where, ": an empty line (installers fail on it)"));
        continue;
      }
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
        f.fail(cat(where, ": ", printable_excerpt(path, 200), " is listed twice (first on line ",
                   it->second, ")"));
        continue;
      }
      if (path == record_name) {
        if (!hash.empty() || !size.empty())
          f.fail(cat(where, ": RECORD's own row must have an empty hash and size"));
        continue;
      }
      auto m = members.find(path);
      if (m == members.end()) {
        f.fail(cat("RECORD lists ", printable_excerpt(path, 200),
                   ", which is not in the wheel (installers would remove that path on uninstall)"));
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
        f.fail(cat("sha256 of ", path, " does not match RECORD (RECORD: ", hash.substr(7),
                   ", file: ", m->second->record_hash.substr(7), ")"));
      } else {
        ++checked;
      }
      if (size != std::to_string(m->second->size))
        f.fail(cat("size of ", path, " does not match RECORD (RECORD: ",
                   size.empty() ? "(none)" : size, ", file: ", m->second->size, ")"));
    }
    if (!listed.count(record_name))
      f.fail(cat("RECORD has no row for itself (", record_name, ",,)"));
    for (const auto& m : w.members)
      if (!listed.count(m.name) && !is_signature_file(w.dist_info, m.name))
        f.fail(cat(m.name, " is in the wheel but not in RECORD"));
    f.data()["record_rows"] = rows.size();
    f.data()["hashes_checked"] = checked;
  }
  return f.finish(cat("zip intact (", zip.entries().size(),
                      " entries, local headers agree with the central directory); "
                      "RECORD matches every file; ",
                      w.dist_info, "/ complete"));
}

}  // namespace kiln::validate
