#include <climits>
#include <cstddef>
#include <optional>

#include "core/strings.h"
#include "patch/patch.h"

namespace kiln::patch {

std::string Hunk::header() const {
  return cat("@@ -", old_start, ",", old_count, " +", new_start, ",", new_count, " @@");
}

namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string_view chomp_cr(std::string_view s) {
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return s;
}

// A header name: C-quoted ("a/with space"), or up to the tab before the timestamp.
struct HeaderName {
  std::string name;
  std::string timestamp;
  bool ok = true;
};

std::optional<std::string> unquote_c(std::string_view s, std::size_t& used) {
  // s starts with '"'
  std::string out;
  std::size_t i = 1;
  while (i < s.size()) {
    char c = s[i++];
    if (c == '"') {
      used = i;
      return out;
    }
    if (c != '\\') {
      out += c;
      continue;
    }
    if (i >= s.size()) return std::nullopt;
    char e = s[i++];
    switch (e) {
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      default:
        if (e >= '0' && e <= '3' && i + 1 < s.size() && s[i] >= '0' && s[i] <= '7' &&
            s[i + 1] >= '0' && s[i + 1] <= '7') {
          out += static_cast<char>(((e - '0') << 6) | ((s[i] - '0') << 3) | (s[i + 1] - '0'));
          i += 2;
        } else {
          return std::nullopt;
        }
    }
  }
  return std::nullopt;
}

HeaderName header_name(std::string_view rest) {
  HeaderName h;
  if (!rest.empty() && rest[0] == '"') {
    std::size_t used = 0;
    auto name = unquote_c(rest, used);
    if (!name) {
      h.ok = false;
      return h;
    }
    h.name = *name;
    h.timestamp = std::string(trim(rest.substr(used)));
    return h;
  }
  std::size_t tab = rest.find('\t');
  std::string_view name = rest.substr(0, tab);
  while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
  h.name = std::string(name);
  if (tab != std::string_view::npos) h.timestamp = std::string(trim(rest.substr(tab + 1)));
  return h;
}

// diff -N marks a missing side with the epoch as its timestamp, in the local time zone:
// "1970-01-01 00:00:00.000000000 +0000", "1969-12-31 19:00:00.000000000 -0500".
bool is_epoch(std::string_view t) {
  auto num = [&](std::size_t at, std::size_t len, long& out) {
    if (at + len > t.size()) return false;
    out = 0;
    for (std::size_t k = at; k < at + len; ++k) {
      if (t[k] < '0' || t[k] > '9') return false;
      out = out * 10 + (t[k] - '0');
    }
    return true;
  };
  long y, mo, d, h, mi, sec, zh, zm;
  if (!num(0, 4, y) || t.substr(4, 1) != "-" || !num(5, 2, mo) || t.substr(7, 1) != "-" ||
      !num(8, 2, d) || t.substr(10, 1) != " " || !num(11, 2, h) || t.substr(13, 1) != ":" ||
      !num(14, 2, mi) || t.substr(16, 1) != ":" || !num(17, 2, sec))
    return false;
  std::size_t pos = 19;
  if (pos < t.size() && t[pos] == '.') {
    ++pos;
    while (pos < t.size() && t[pos] == '0') ++pos;
    if (pos < t.size() && t[pos] >= '1' && t[pos] <= '9')
      return false;  // a fraction: not the epoch
  }
  long zone = 0;
  if (pos < t.size() && t[pos] == ' ' && pos + 5 < t.size() &&
      (t[pos + 1] == '+' || t[pos + 1] == '-')) {
    if (!num(pos + 2, 2, zh) || !num(pos + 4, 2, zm)) return false;
    zone = (t[pos + 1] == '-' ? -1 : 1) * (zh * 3600 + zm * 60);
  }
  // Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
  long yy = mo <= 2 ? y - 1 : y;
  long era = yy / 400;
  long yoe = yy - era * 400;
  long doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  long days = era * 146097 + doe - 719468;
  return days * 86400 + h * 3600 + mi * 60 + sec - zone == 0;
}

// Reads a decimal number of at most 9 digits at s[pos], advancing pos.
std::optional<int> read_number(std::string_view s, std::size_t& pos) {
  std::size_t start = pos;
  long value = 0;
  while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
    if (pos - start >= 9) return std::nullopt;
    value = value * 10 + (s[pos] - '0');
    ++pos;
  }
  if (pos == start) return std::nullopt;
  return static_cast<int>(value);
}

// "-l[,n]" or "+l[,n]"; n defaults to 1.
bool read_range(std::string_view s, std::size_t& pos, char sign, int& start, int& count) {
  if (pos >= s.size() || s[pos] != sign) return false;
  ++pos;
  auto l = read_number(s, pos);
  if (!l) return false;
  start = *l;
  count = 1;
  if (pos < s.size() && s[pos] == ',') {
    ++pos;
    auto n = read_number(s, pos);
    if (!n) return false;
    count = *n;
  }
  return true;
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view name, int strip) : name_(name), strip_(strip) {
    std::size_t start = 0;
    while (start < text.size()) {
      std::size_t end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      lines_.push_back(text.substr(start, end - start));
      start = end + 1;
    }
  }

  Expected<std::vector<FilePatch>> run() {
    if (strip_ < 0)
      return Error::bad_input(cat("patch ", name_, ": negative strip count ", strip_));
    enum class State { Text, GitHeader, Hunks };
    State state = State::Text;
    for (std::size_t i = 0; i < lines_.size(); ++i) {
      std::string_view s = chomp_cr(lines_[i]);
      int line_no = static_cast<int>(i) + 1;
      if (starts_with(s, "diff --git ")) {
        KILN_CHECK(finish());
        cur_.emplace();
        cur_git_ = true;
        cur_has_names_ = false;
        git_line_ = std::string(s.substr(11));
        cur_->header_line = line_no;
        state = State::GitHeader;
        continue;
      }
      if (state == State::GitHeader) {
        bool consumed = true;
        if (starts_with(s, "index ")) {
        } else if (starts_with(s, "new file mode ")) {
          cur_->creates = true;
          KILN_TRY(cur_->new_mode, git_mode(s.substr(14), line_no));
        } else if (starts_with(s, "deleted file mode ")) {
          cur_->deletes = true;
          KILN_TRY(int mode, git_mode(s.substr(18), line_no));
          (void)mode;
        } else if (starts_with(s, "old mode ")) {
          KILN_TRY(int mode, git_mode(s.substr(9), line_no));
          (void)mode;
        } else if (starts_with(s, "new mode ")) {
          KILN_TRY(cur_->new_mode, git_mode(s.substr(9), line_no));
        } else if (starts_with(s, "similarity index") || starts_with(s, "dissimilarity index") ||
                   starts_with(s, "rename from") || starts_with(s, "rename to") ||
                   starts_with(s, "copy from") || starts_with(s, "copy to")) {
          return error(line_no,
                       "renames and copies are not supported (make the diff with "
                       "--no-renames)");
        } else if (starts_with(s, "GIT binary patch") || starts_with(s, "Binary files ")) {
          return error(line_no, "binary diffs are not supported");
        } else {
          consumed = false;
        }
        if (consumed) continue;
        state = State::Text;  // falls through: "--- " or free text
      }
      if (starts_with(s, "--- ") && i + 1 < lines_.size() &&
          starts_with(chomp_cr(lines_[i + 1]), "+++ ")) {
        if (!(cur_ && cur_git_ && !cur_has_names_ && cur_->hunks.empty())) {
          KILN_CHECK(finish());
          cur_.emplace();
          cur_git_ = false;
          cur_->header_line = line_no;
        }
        old_name_ = header_name(s.substr(4));
        new_name_ = header_name(chomp_cr(lines_[i + 1]).substr(4));
        if (!old_name_.ok || !new_name_.ok) return error(line_no, "badly quoted file name");
        cur_has_names_ = true;
        ++i;
        state = State::Hunks;
        continue;
      }
      if (starts_with(s, "@@")) {
        if (!cur_ || !cur_has_names_ || state != State::Hunks)
          return error(line_no,
                       cat("hunk header '", printable_excerpt(s),
                           "' is not preceded by a file header ('--- ' and '+++ ' lines)"));
        KILN_CHECK(read_hunk(i));
        continue;
      }
      if (state == State::Hunks && !s.empty() && s != "-- " && s != "--" &&
          (s[0] == ' ' || s[0] == '+' || s[0] == '-' || s[0] == '\\')) {
        if (s[0] == '\\')
          return error(line_no,
                       cat("'", printable_excerpt(s), "' does not follow a hunk's last line"));
        if (cur_->hunks.empty())
          return error(line_no, cat("expected an '@@' hunk header after the file header, found '",
                                    printable_excerpt(s), "'"));
        const Hunk& h = cur_->hunks.back();
        return error(line_no,
                     cat("hunk ", cur_->hunks.size(), " (", h.header(), ", line ", h.header_line,
                         ") has more lines than its header counts ('", printable_excerpt(s), "')"));
      }
      if (state == State::Hunks) {
        KILN_CHECK(finish());  // free text ends a file's hunks
        state = State::Text;
      }
    }
    KILN_CHECK(finish());
    if (out_.empty())
      return Error::bad_input(cat("patch ", name_,
                                  ": no file differences found (expected '--- ' "
                                  "and '+++ ' lines followed by '@@' hunks)"));
    return std::move(out_);
  }

 private:
  Error error(int line, std::string_view message) const {
    return Error::bad_input(cat("patch ", name_, " line ", line, ": ", message));
  }

  Expected<int> git_mode(std::string_view text, int line) const {
    std::string_view m = trim(text);
    if (m == "100644") return 0644;
    if (m == "100755") return 0755;
    if (m == "120000") return error(line, "symlinks in patches are not supported");
    if (m == "160000") return error(line, "submodules in patches are not supported");
    return error(line, cat("unsupported file mode '", printable_excerpt(m), "'"));
  }

  // Strips `strip_` leading components and checks that the rest stays inside the tree.
  Expected<std::string> strip_path(const std::string& raw, int line) const {
    if (raw.find('\0') != std::string::npos) return error(line, "file name contains a NUL byte");
    std::string_view p = raw;
    for (int k = 0; k < strip_; ++k) {
      std::size_t slash = p.find('/');
      if (slash == std::string_view::npos)
        return error(line, cat("file name '", printable_excerpt(raw), "' has fewer than ",
                               strip_ + 1, " components (stripping ", strip_, ")"));
      p = p.substr(slash + 1);
      while (!p.empty() && p[0] == '/') p.remove_prefix(1);
    }
    if (p.empty())
      return error(line, cat("file name '", printable_excerpt(raw), "' is empty after stripping"));
    if (p[0] == '/')
      return error(line,
                   cat("file name '", printable_excerpt(raw), "' is absolute after stripping"));
    std::vector<std::string> parts;
    for (const auto& part : split(p, "/")) {
      if (part == "..")
        return error(line, cat("file name '", printable_excerpt(raw), "' escapes the tree ('..')"));
      if (part != ".") parts.push_back(part);
    }
    if (parts.empty())
      return error(line, cat("file name '", printable_excerpt(raw), "' names no file"));
    return join(parts, "/");
  }

  // The file both halves of "a/x b/x" name (used when a git diff has no ---/+++ lines).
  Expected<std::string> git_line_path(int line) const {
    std::string_view rest = git_line_;
    if (!rest.empty() && rest[0] == '"') {
      std::size_t used = 0;
      auto a = unquote_c(rest, used);
      if (a) return strip_path(*a, line);
    }
    for (std::size_t sp = rest.find(' '); sp != std::string_view::npos;
         sp = rest.find(' ', sp + 1)) {
      std::string a(rest.substr(0, sp)), b(rest.substr(sp + 1));
      auto sa = strip_path(a, line);
      auto sb = strip_path(b, line);
      if (sa && sb && *sa == *sb) return sa;
    }
    return error(line, cat("cannot tell the file name from 'diff --git ",
                           printable_excerpt(git_line_), "'"));
  }

  Expected<void> read_hunk(std::size_t& i) {
    std::string_view s = chomp_cr(lines_[i]);
    int line_no = static_cast<int>(i) + 1;
    Hunk h;
    h.header_line = line_no;
    std::size_t pos = 2;
    bool ok = pos < s.size() && s[pos] == ' ';
    if (ok) {
      ++pos;
      ok = read_range(s, pos, '-', h.old_start, h.old_count) && pos < s.size() && s[pos] == ' ';
    }
    if (ok) {
      ++pos;
      ok = read_range(s, pos, '+', h.new_start, h.new_count) && s.substr(pos, 3) == " @@";
    }
    if (!ok) return error(line_no, cat("bad hunk header '", printable_excerpt(s), "'"));
    if (h.old_count == 0 && h.new_count == 0)
      return error(line_no, cat("hunk header '", printable_excerpt(s), "' counts no lines"));
    if ((h.old_count > 0 && h.old_start == 0) || (h.new_count > 0 && h.new_start == 0))
      return error(line_no, cat("hunk header '", printable_excerpt(s), "' has a line number 0"));
    std::size_t hunk_no = cur_->hunks.size() + 1;
    auto malformed = [&](int at, int old_seen, int new_seen, std::string_view why) {
      return error(at,
                   cat("hunk ", hunk_no, " (", h.header(), ", line ", h.header_line,
                       ") is malformed: its header counts ", h.old_count, " old and ", h.new_count,
                       " new lines, but ", why, " after ", old_seen, " and ", new_seen));
    };
    int old_left = h.old_count, new_left = h.new_count;
    int cr_lines = 0, unterminated = 0;
    // A "\ No newline at end of file" marker: valid only after the last old or new line.
    auto marker = [&](int at) -> Expected<void> {
      if (h.lines.empty()) return error(at, "'\\ No newline at end of file' before any hunk line");
      char kind = h.lines.back()[0];
      bool last_old = old_left == 0, last_new = new_left == 0;
      if ((kind == '-' && !last_old) || (kind == '+' && !last_new) ||
          (kind == ' ' && !(last_old && last_new)))
        return error(at,
                     "'\\ No newline at end of file' follows a line that is not the hunk's last");
      if (kind != '+') h.old_no_newline = true;
      if (kind != '-') h.new_no_newline = true;
      ++unterminated;  // that line had no line end of its own: it says nothing about CRLF
      return {};
    };
    while (old_left > 0 || new_left > 0) {
      ++i;
      int at = static_cast<int>(i) + 1;
      int old_seen = h.old_count - old_left, new_seen = h.new_count - new_left;
      if (i >= lines_.size()) {
        --i;
        return malformed(at - 1, old_seen, new_seen, "the patch ends");
      }
      std::string_view raw = lines_[i];
      std::string_view body = chomp_cr(raw);
      if (body.size() != raw.size()) ++cr_lines;
      char kind = body.empty() ? ' ' : body[0];
      std::string_view content = body.empty() ? body : body.substr(1);
      if (kind == '\\') {
        KILN_CHECK(marker(at));
        continue;
      }
      if (kind != ' ' && kind != '-' && kind != '+')
        return malformed(at, old_seen, new_seen,
                         cat("its body ends ('", printable_excerpt(body), "')"));
      if (!h.lines.empty() && (h.old_no_newline || h.new_no_newline)) {
        // Only the other side's lines may follow a marker.
        bool bad =
            kind == ' ' || (kind == '-' && h.old_no_newline) || (kind == '+' && h.new_no_newline);
        if (bad) return error(at, "a line follows '\\ No newline at end of file' on its side");
      }
      if ((kind != '+' && old_left == 0) || (kind != '-' && new_left == 0))
        return malformed(at, old_seen, new_seen,
                         cat("the body has more ",
                             kind == '+'   ? "new"
                             : kind == '-' ? "old"
                                           : "context",
                             " lines ('", printable_excerpt(body), "')"));
      if (kind != '+') --old_left;
      if (kind != '-') --new_left;
      h.lines.push_back(cat(kind, content));
    }
    if (i + 1 < lines_.size() && starts_with(lines_[i + 1], "\\")) {
      ++i;
      KILN_CHECK(marker(static_cast<int>(i) + 1));
    }
    cr_lines_ += cr_lines;
    body_lines_ += static_cast<int>(h.lines.size()) - unterminated;
    cur_->hunks.push_back(std::move(h));
    return {};
  }

  // Validates the file diff in progress and adds it to the result.
  Expected<void> finish() {
    if (!cur_) return {};
    FilePatch fp = std::move(*cur_);
    cur_.reset();
    int line = fp.header_line;
    fp.crlf = body_lines_ > 0 && cr_lines_ * 2 > body_lines_;
    cr_lines_ = body_lines_ = 0;
    if (cur_has_names_) {
      bool old_null = old_name_.name == "/dev/null" || (is_epoch(old_name_.timestamp) && !cur_git_);
      bool new_null = new_name_.name == "/dev/null" || (is_epoch(new_name_.timestamp) && !cur_git_);
      if (old_null && new_null) return error(line, "both file names are /dev/null");
      if (!old_null) {
        KILN_TRY(fp.old_path, strip_path(old_name_.name, line));
      }
      if (!new_null) {
        KILN_TRY(fp.new_path, strip_path(new_name_.name, line));
      }
      if (old_null) fp.creates = true;
      if (new_null) fp.deletes = true;
    } else {
      // A git diff without ---/+++ lines: a mode change, or an empty file created or deleted.
      KILN_TRY(std::string path, git_line_path(line));
      fp.old_path = fp.creates ? std::string() : path;
      fp.new_path = fp.deletes ? std::string() : path;
      if (!fp.creates && !fp.deletes && fp.new_mode == 0) return {};  // e.g. only an index line
    }
    if (fp.creates && fp.deletes)
      return error(line, "the file diff both creates and deletes its file");
    if (fp.creates) fp.old_path.clear();
    if (fp.deletes) fp.new_path.clear();
    if (fp.hunks.empty() && !(cur_git_ && (fp.creates || fp.deletes || fp.new_mode != 0)))
      return error(line,
                   cat("the diff of ", fp.creates ? fp.new_path : fp.old_path, " has no hunks"));
    for (std::size_t k = 0; k < fp.hunks.size(); ++k) {
      const Hunk& h = fp.hunks[k];
      if (fp.creates && h.old_count != 0)
        return error(h.header_line,
                     cat("hunk ", k + 1, " (", h.header(), ") of a new file has old lines"));
      if (fp.deletes && h.new_count != 0)
        return error(h.header_line,
                     cat("hunk ", k + 1, " (", h.header(), ") of a deleted file has new lines"));
    }
    out_.push_back(std::move(fp));
    return {};
  }

  std::string_view name_;
  int strip_;
  std::vector<std::string_view> lines_;
  std::vector<FilePatch> out_;
  std::optional<FilePatch> cur_;
  bool cur_git_ = false;
  bool cur_has_names_ = false;
  std::string git_line_;
  HeaderName old_name_, new_name_;
  int cr_lines_ = 0, body_lines_ = 0;
};

}  // namespace

Expected<std::vector<FilePatch>> parse(std::string_view text, std::string_view patch_name,
                                       int strip) {
  return Parser(text, patch_name, strip).run();
}

}  // namespace kiln::patch
