// Check "archive": a well-formed zip (strict reader), the dist-info layout, and RECORD listing
// every file exactly once with its urlsafe-base64 sha256 and size, and its own row empty.
#include <map>
#include <set>

#include "core/strings.h"
#include "packaging/name.h"
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

}  // namespace

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

namespace {

bool is_signature_file(const std::string& dist_info, const std::string& name) {
  return name == dist_info + "/RECORD.jws" || name == dist_info + "/RECORD.p7s";
}

// `s` ends in `suffix` and has more before it (a bare ".data" names no project).
bool has_suffix(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Whether a top-level "<name>-<version><suffix>" directory belongs to this wheel: installers
// compare the name normalised; the version must be the file name's.
bool names_this_wheel(const std::string& found, const std::string& suffix,
                      const packaging::WheelFileName& name) {
  std::string stem = found.substr(0, found.size() - suffix.size());
  auto dash = stem.rfind('-');
  if (dash == std::string::npos) return false;
  return packaging::file_name_part(stem.substr(0, dash)) ==
             packaging::file_name_part(name.distribution) &&
         stem.substr(dash + 1) == name.version;
}

// The top-level .dist-info and .data directories, in name order.
struct TopDirs {
  std::set<std::string> infos, datas;
};

// Every entry: no symbolic links (installers write them as files); under a .data directory only
// its five kinds. Collects the .dist-info and .data directories on the way.
TopDirs scan_entries(const archive::ZipReader& zip, Findings& f) {
  TopDirs dirs;
  for (const auto& e : zip.entries()) {
    if (e.is_symlink())
      f.fail(cat("entry '", e.name, "' is a symbolic link (installers write it as a file)"));
    auto slash = e.name.find('/');
    if (slash == std::string::npos) continue;
    std::string top = e.name.substr(0, slash);
    if (has_suffix(top, ".dist-info")) dirs.infos.insert(top);
    if (has_suffix(top, ".data")) {
      dirs.datas.insert(top);
      std::string rest = e.name.substr(slash + 1);
      std::string kind = rest.substr(0, rest.find('/'));
      static const std::set<std::string> kinds = {"purelib", "platlib", "headers", "scripts",
                                                  "data"};
      if (!kinds.count(kind) && !e.is_directory())
        f.fail(cat("entry '", e.name, "' is in ", top,
                   "/ but not under purelib, platlib, headers, scripts or data"));
    }
  }
  return dirs;
}

// Layout: one .dist-info directory, named after the file name, holding METADATA, WHEEL and
// RECORD; each .data directory named after the file name too.
void check_layout(const LoadedWheel& w, const TopDirs& dirs, Findings& f) {
  std::string want_info = cat(w.name.distribution, "-", w.name.version, ".dist-info");
  std::string want_data = cat(w.name.distribution, "-", w.name.version, ".data");
  if (dirs.infos.empty()) {
    f.fail(cat("no .dist-info directory (expected ", want_info, "/)"));
  } else if (dirs.infos.size() > 1) {
    f.fail(cat("several .dist-info directories: ",
               join(std::vector<std::string>(dirs.infos.begin(), dirs.infos.end()), ", ")));
  } else if (!names_this_wheel(*dirs.infos.begin(), ".dist-info", w.name)) {
    f.fail(cat("the .dist-info directory is ", *dirs.infos.begin(), "; the file name says ",
               want_info));
  }
  for (const auto& d : dirs.datas)
    if (!names_this_wheel(d, ".data", w.name))
      f.fail(cat("the .data directory is ", d, "; the file name says ", want_data));
  if (!w.dist_info.empty()) {
    for (const char* required : {"METADATA", "WHEEL", "RECORD"})
      if (!w.zip->find(cat(w.dist_info, "/", required)))
        f.fail(cat(w.dist_info, "/", required, " is missing"));
  }
}

// RECORD's rows against the files read back: each file listed once with its sha256 and size,
// RECORD's own row empty, nothing listed that is not there.
class RecordCheck {
 public:
  RecordCheck(const LoadedWheel& w, const std::map<std::string, const Member*>& members,
              Findings& f)
      : w_(w), members_(members), f_(f), record_name_(cat(w.dist_info, "/RECORD")) {}

  void run(const std::string& text) {
    if (!is_valid_utf8(text)) f_.fail("RECORD is not valid UTF-8");
    const auto rows = parse_record(text);
    for (const auto& [line, fields] : rows) row(line, fields);
    if (!listed_.count(record_name_))
      f_.fail(cat("RECORD has no row for itself (", record_name_, ",,)"));
    for (const auto& m : w_.members)
      if (!listed_.count(m.name) && !is_signature_file(w_.dist_info, m.name))
        f_.fail(cat(m.name, " is in the wheel but not in RECORD"));
    f_.data()["record_rows"] = rows.size();
    f_.data()["hashes_checked"] = checked_;
  }

 private:
  // One row: three fields, a path not listed before; RECORD's own row has no hash and size.
  void row(std::size_t line, const std::vector<std::string>& fields) {
    auto where = cat("RECORD line ", line);
    if (fields.empty()) {
      f_.fail(cat(where, ": an empty line (installers fail on it)"));
      return;
    }
    if (fields.size() != 3) {
      f_.fail(cat(where, ": ", fields.size(), " fields instead of 3 (path,hash,size)"));
      return;
    }
    const std::string& path = fields[0];
    if (path.empty()) {
      f_.fail(cat(where, ": empty path"));
      return;
    }
    if (auto [it, fresh] = listed_.emplace(path, line); !fresh) {
      f_.fail(cat(where, ": ", printable_excerpt(path, 200), " is listed twice (first on line ",
                  it->second, ")"));
      return;
    }
    if (path == record_name_) {
      if (!fields[1].empty() || !fields[2].empty())
        f_.fail(cat(where, ": RECORD's own row must have an empty hash and size"));
      return;
    }
    auto m = members_.find(path);
    if (m == members_.end()) {
      f_.fail(cat("RECORD lists ", printable_excerpt(path, 200),
                  ", which is not in the wheel (installers would remove that path on uninstall)"));
      return;
    }
    if (!m->second->error.empty()) return;  // reported with the entries that did not read back
    check_file(path, fields[1], fields[2], *m->second);
  }

  // A listed file's hash (sha256 only: md5 and sha1 are forbidden, others unchecked) and size.
  void check_file(const std::string& path, const std::string& hash, const std::string& size,
                  const Member& m) {
    auto eq = hash.find('=');
    std::string algorithm = eq == std::string::npos ? hash : hash.substr(0, eq);
    if (hash.empty()) {
      f_.fail(cat("RECORD has no hash for ", path));
    } else if (algorithm != "sha256") {
      if (algorithm == "md5" || algorithm == "sha1")
        f_.fail(cat("RECORD hashes ", path, " with ", algorithm, ", which PEP 427 forbids"));
      else
        f_.warn(cat("RECORD hashes ", path, " with ", algorithm, "; kiln checks sha256 only"));
    } else if (hash != m.record_hash) {
      f_.fail(cat("sha256 of ", path, " does not match RECORD (RECORD: ", hash.substr(7),
                  ", file: ", m.record_hash.substr(7), ")"));
    } else {
      ++checked_;
    }
    if (size != std::to_string(m.size))
      f_.fail(cat("size of ", path, " does not match RECORD (RECORD: ",
                  size.empty() ? "(none)" : size, ", file: ", m.size, ")"));
  }

  const LoadedWheel& w_;
  const std::map<std::string, const Member*>& members_;
  Findings& f_;
  const std::string record_name_;
  std::map<std::string, std::size_t> listed_;  // path -> line
  std::size_t checked_ = 0;
};

}  // namespace

CheckResult check_archive(const LoadedWheel& w) {
  Findings f("archive");
  if (!w.zip) {
    f.fail(w.zip_error);
    return f.finish("");
  }
  const auto& zip = *w.zip;
  f.data()["entries"] = zip.entries().size();
  check_layout(w, scan_entries(zip, f), f);

  // Every entry must read back: sizes and CRCs against the central directory.
  std::map<std::string, const Member*> members;
  for (const auto& m : w.members) {
    members[m.name] = &m;
    if (!m.error.empty()) f.fail(m.error);
  }
  if (auto record = w.texts.find("RECORD"); record != w.texts.end())
    RecordCheck(w, members, f).run(record->second);
  return f.finish(cat("zip intact (", zip.entries().size(),
                      " entries, local headers agree with the central directory); "
                      "RECORD matches every file; ",
                      w.dist_info, "/ complete"));
}

}  // namespace kiln::validate
