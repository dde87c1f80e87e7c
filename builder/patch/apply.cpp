#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "core/fs.h"
#include "core/strings.h"
#include "patch/patch.h"

namespace kiln::patch {

namespace {

namespace fs = std::filesystem;

bool inside(const fs::path& path, const fs::path& root) {
  fs::path rel = path.lexically_relative(root);
  return !rel.empty() && *rel.begin() != "..";
}

// One file of the tree as the series sees it: as it was on disk, and as the patches so far left it.
struct TreeFile {
  fs::path abs;
  bool existed = false;
  std::string original;
  int original_mode = 0;
  bool exists = false;
  std::string content;
  int mode = 0;
};

class MemTree {
 public:
  explicit MemTree(fs::path root) : root_(std::move(root)) {}

  // The file at `rel` (a stripped, checked patch path), read from disk on first use. Its key is
  // its path relative to the tree after resolving symlinked directories inside the tree.
  Expected<std::pair<std::string, TreeFile*>> file(const std::string& rel,
                                                   std::string_view prefix) {
    fs::path cur = root_;
    std::vector<std::string> parts = split(rel, "/");
    for (std::size_t k = 0; k < parts.size(); ++k) {
      fs::path next = cur / parts[k];
      bool last = k + 1 == parts.size();
      std::string shown_path = join(
          std::vector<std::string>(parts.begin(), parts.begin() + static_cast<long>(k) + 1), "/");
      struct stat st {};
      if (::lstat(next.c_str(), &st) != 0) {
        if (errno != ENOENT)
          return Error::failed(
              cat(prefix, "cannot inspect ", next.string(), ": ", std::strerror(errno)));
        for (std::size_t r = k + 1; r < parts.size(); ++r) next /= parts[r];
        cur = next;
        break;
      }
      if (S_ISLNK(st.st_mode)) {
        if (last)
          return Error::bad_input(
              cat(prefix, rel, " is a symlink in the tree; kiln patches only regular files"));
        std::error_code ec;
        fs::path target = fs::canonical(next, ec);
        if (ec)
          return Error::bad_input(cat(prefix, rel, ": '", shown_path, "' is a dangling symlink"));
        if (!inside(target, root_))
          return Error::bad_input(
              cat(prefix, rel, ": '", shown_path, "' is a symlink pointing outside the tree"));
        struct stat tst {};
        if (::stat(target.c_str(), &tst) != 0 || !S_ISDIR(tst.st_mode))
          return Error::bad_input(cat(prefix, rel, ": '", shown_path, "' is not a directory"));
        cur = target;
      } else if (S_ISDIR(st.st_mode)) {
        if (last) return Error::bad_input(cat(prefix, rel, " is a directory in the tree"));
        cur = next;
      } else if (S_ISREG(st.st_mode)) {
        if (!last)
          return Error::bad_input(
              cat(prefix, rel, ": '", shown_path, "' is a file, not a directory"));
        cur = next;
      } else {
        return Error::bad_input(cat(prefix, rel, ": '", shown_path, "' is not a regular file"));
      }
    }
    std::string key = cur.lexically_relative(root_).generic_string();
    auto [it, inserted] = files_.try_emplace(key);
    TreeFile& f = it->second;
    if (inserted) {
      f.abs = cur;
      struct stat st {};
      if (::lstat(cur.c_str(), &st) == 0) {
        KILN_TRY(f.original, read_file(cur));
        f.existed = f.exists = true;
        f.original_mode = f.mode = static_cast<int>(st.st_mode & 07777);
        f.content = f.original;
      }
    }
    return std::make_pair(key, &f);
  }

  const fs::path& root() const { return root_; }
  std::map<std::string, TreeFile>& files() { return files_; }

 private:
  fs::path root_;
  std::map<std::string, TreeFile> files_;
};

struct Line {
  std::string_view text;  // without its line end
  std::string_view eol;   // "\n", "\r\n" or "" (the last line, without a newline)
};

std::vector<Line> split_lines(std::string_view content) {
  std::vector<Line> lines;
  std::size_t start = 0;
  while (start < content.size()) {
    std::size_t nl = content.find('\n', start);
    if (nl == std::string_view::npos) {
      lines.push_back({content.substr(start), {}});
      break;
    }
    std::size_t end = nl;
    if (end > start && content[end - 1] == '\r') --end;
    lines.push_back({content.substr(start, end - start), content.substr(end, nl + 1 - end)});
    start = nl + 1;
  }
  return lines;
}

// Applies a file diff's hunks to `content` (GNU patch's search, --fuzz=0).
Expected<std::string> apply_hunks(std::string_view content, const FilePatch& fp,
                                  std::string_view label, std::string_view note_label,
                                  std::vector<std::string>& notes) {
  std::vector<Line> lines = split_lines(content);
  long n = static_cast<long>(lines.size());
  long crlf = 0, lf = 0;
  for (const auto& l : lines) {
    if (l.eol == "\r\n")
      ++crlf;
    else if (l.eol == "\n")
      ++lf;
  }
  std::string_view default_eol = (crlf > lf || (crlf == 0 && lf == 0 && fp.crlf)) ? "\r\n" : "\n";

  std::vector<Line> out;
  long last_end = 0;  // lines before this are already emitted (hunks never overlap)
  long carried = 0;   // the previous hunk's offset, where the next search starts
  for (std::size_t k = 0; k < fp.hunks.size(); ++k) {
    const Hunk& h = fp.hunks[k];
    std::vector<std::string_view> old;
    for (const auto& l : h.lines)
      if (l[0] != '+') old.push_back(std::string_view(l).substr(1));
    long m = static_cast<long>(old.size());
    bool at_eof = h.old_no_newline || h.new_no_newline;
    long stated = h.old_count == 0 ? h.old_start : h.old_start - 1;
    long guess = stated + carried;
    auto matches = [&](long pos) {
      if (pos < last_end || pos + m > n) return false;
      if (at_eof && pos + m != n) return false;
      for (long j = 0; j < m; ++j)
        if (lines[static_cast<std::size_t>(pos + j)].text != old[static_cast<std::size_t>(j)])
          return false;
      return true;
    };
    long pos = -1;
    if (m == 0) {
      // Nothing to match (a pure insertion without context): it goes where the header says.
      if (matches(guess)) pos = guess;
    } else if (last_end <= n - m) {
      long lo = last_end, hi = n - m;
      long first = guess < lo ? lo - guess : guess > hi ? guess - hi : 0;
      long limit = std::max(std::abs(guess - lo), std::abs(hi - guess));
      for (long off = first; off <= limit && pos < 0; ++off) {
        if (matches(guess + off))
          pos = guess + off;
        else if (off > 0 && matches(guess - off))
          pos = guess - off;
      }
    }
    if (pos < 0) {
      std::string why;
      if (m == 0) {
        why = cat("it inserts after line ", guess, ", which is not in the file (", n,
                  " lines) or not after the previous hunk");
      } else if (m > n - last_end) {
        why = cat("no exact match for its ", m, " context and removed line", m == 1 ? "" : "s",
                  "; the file has only ", n, " lines");
      } else {
        why = cat("no exact match for its ", m, " context and removed line", m == 1 ? "" : "s");
        long g = std::clamp(guess, last_end, n - m);
        long j = 0;
        while (j < m &&
               lines[static_cast<std::size_t>(g + j)].text == old[static_cast<std::size_t>(j)])
          ++j;
        if (j < m) {
          why += cat("; at line ", g + j + 1, " the file has '",
                     printable_excerpt(lines[static_cast<std::size_t>(g + j)].text),
                     "' where the patch expects '",
                     printable_excerpt(old[static_cast<std::size_t>(j)]), "'");
        } else if (at_eof) {
          why += cat("; its lines match at line ", g + 1,
                     " but it must end at the end of the file ('\\ No newline at end of file')");
        }
      }
      return Error::bad_input(cat(label, ": hunk ", k + 1, " (", h.header(), ", patch line ",
                                  h.header_line, ") does not apply: ", why));
    }
    if (pos != stated) {
      long off = pos - stated;
      notes.push_back(cat(note_label, ": hunk ", k + 1, " applied at offset ", off > 0 ? "+" : "",
                          off, " (line ", pos + 1, ")"));
    }
    for (long i = last_end; i < pos; ++i) out.push_back(lines[static_cast<std::size_t>(i)]);
    std::size_t fk = static_cast<std::size_t>(pos);
    char last_new = 0;
    for (const auto& l : h.lines) {
      if (l[0] == ' ') {
        out.push_back(lines[fk++]);
        last_new = ' ';
      } else if (l[0] == '-') {
        ++fk;
      } else {
        out.push_back({std::string_view(l).substr(1), default_eol});
        last_new = '+';
      }
    }
    if (h.new_no_newline && last_new == '+') out.back().eol = {};
    last_end = pos + m;
    carried = pos - stated;
  }
  for (long i = last_end; i < n; ++i) out.push_back(lines[static_cast<std::size_t>(i)]);
  std::string result;
  result.reserve(content.size() + 256);
  for (std::size_t i = 0; i < out.size(); ++i) {
    result += out[i].text;
    // A line that lost its end-of-file position gets a line end.
    result += (out[i].eol.empty() && i + 1 < out.size()) ? default_eol : out[i].eol;
  }
  return result;
}

// GNU patch's choice between two existing names: fewest components, then shortest base name,
// then shortest name.
bool better_name(const std::string& a, const std::string& b) {
  auto parts = [](const std::string& s) { return std::count(s.begin(), s.end(), '/'); };
  auto base = [](const std::string& s) {
    return s.size() - (s.rfind('/') == std::string::npos ? 0 : s.rfind('/') + 1);
  };
  if (parts(a) != parts(b)) return parts(a) < parts(b);
  if (base(a) != base(b)) return base(a) < base(b);
  return a.size() <= b.size();
}

Expected<void> apply_file(MemTree& tree, const FilePatch& fp, const PatchText& patch,
                          std::vector<std::string>& notes) {
  std::string prefix = cat("patch ", patch.name, ": ");
  std::string rel;
  if (fp.creates) {
    rel = fp.new_path;
  } else if (fp.deletes || fp.old_path == fp.new_path) {
    rel = fp.old_path;
  } else {
    // Different names without a rename (diff -u setup.py.orig setup.py): the one that exists.
    KILN_TRY(auto a, tree.file(fp.old_path, prefix));
    KILN_TRY(auto b, tree.file(fp.new_path, prefix));
    if (a.second->exists && b.second->exists)
      rel = better_name(fp.old_path, fp.new_path) ? fp.old_path : fp.new_path;
    else if (a.second->exists)
      rel = fp.old_path;
    else if (b.second->exists)
      rel = fp.new_path;
    else
      return Error::bad_input(
          cat(prefix, "neither ", fp.old_path, " nor ", fp.new_path, " exists in the tree"));
  }
  KILN_TRY(auto entry, tree.file(rel, prefix));
  TreeFile& f = *entry.second;
  bool all_insert_at_0 =
      !fp.hunks.empty() && std::all_of(fp.hunks.begin(), fp.hunks.end(), [](const Hunk& h) {
        return h.old_start == 0 && h.old_count == 0;
      });
  bool create = fp.creates || (!f.exists && all_insert_at_0);
  if (create && f.exists)
    return Error::bad_input(
        cat(prefix, rel, ": the patch creates it, but it already exists in the tree"));
  if (!create && !f.exists)
    return Error::bad_input(cat(prefix, rel, " does not exist in the tree",
                                f.existed ? " (an earlier patch deleted it)" : ""));
  std::string label = cat(prefix, rel);
  std::string note_label = cat(patch.name, ": ", rel);
  KILN_TRY(std::string result,
           apply_hunks(create ? std::string_view() : std::string_view(f.content), fp, label,
                       note_label, notes));
  if (fp.deletes) {
    if (!result.empty())
      return Error::bad_input(cat(label, ": the patch deletes it, but its hunks leave ",
                                  split_lines(result).size(), " line(s) of it"));
    f.exists = false;
    f.content.clear();
    return {};
  }
  f.exists = true;
  f.content = std::move(result);
  if (create)
    f.mode = fp.new_mode ? fp.new_mode : 0644;
  else if (fp.new_mode)
    f.mode = fp.new_mode;
  return {};
}

// Removes `dir` and its parents below `root` while they are empty.
void remove_empty_parents(fs::path dir, const fs::path& root) {
  while (inside(dir, root) && dir != root) {
    if (::rmdir(dir.c_str()) != 0) break;
    dir = dir.parent_path();
  }
}

}  // namespace

Expected<ApplyResult> apply_series(const fs::path& tree, const std::vector<PatchText>& patches,
                                   int strip) {
  std::error_code ec;
  fs::path root = fs::canonical(tree, ec);
  if (ec || !fs::is_directory(root, ec))
    return Error::failed(cat("cannot patch ", tree.string(), ": not a directory"));
  MemTree mem(root);
  ApplyResult result;
  for (const auto& patch : patches) {
    KILN_TRY(std::vector<FilePatch> files, parse(patch.text, patch.name, strip));
    for (const auto& fp : files) KILN_CHECK(apply_file(mem, fp, patch, result.notes));
  }

  // A name cannot end up as both a file and a directory.
  std::set<std::string> present;
  for (const auto& [key, f] : mem.files())
    if (f.exists) present.insert(key);
  for (const auto& key : present) {
    for (std::size_t slash = key.find('/'); slash != std::string::npos;
         slash = key.find('/', slash + 1))
      if (present.count(key.substr(0, slash)))
        return Error::bad_input(
            cat("the patch series makes ", key.substr(0, slash), " both a file and a directory"));
  }

  // Stage every write as a temporary file beside its target; publish them only when all are
  // written, so a failed write (a full disk) leaves the tree as it was.
  std::vector<AtomicFile> staged;
  std::vector<fs::path> made_dirs;
  std::vector<TreeFile*> deletions;
  auto undo = [&](Error error) {
    staged.clear();
    for (auto it = made_dirs.rbegin(); it != made_dirs.rend(); ++it) ::rmdir(it->c_str());
    return error;
  };
  for (auto& [key, f] : mem.files()) {
    if (!f.existed && !f.exists) continue;
    if (f.existed && f.exists && f.content == f.original && f.mode == f.original_mode) continue;
    result.changed_files.push_back(key);
    if (!f.exists) {
      deletions.push_back(&f);
      continue;
    }
    fs::path parent = f.abs.parent_path();
    std::vector<fs::path> missing;
    for (fs::path d = parent; inside(d, root) && !fs::exists(d, ec); d = d.parent_path())
      missing.push_back(d);
    auto made = ensure_directory(parent);
    made_dirs.insert(made_dirs.end(), missing.rbegin(), missing.rend());
    if (!made) return undo(std::move(made).error());
    auto file = AtomicFile::create(f.abs, f.mode);
    if (!file) return undo(std::move(file).error());
    staged.push_back(std::move(*file));
    auto written = staged.back().write(f.content);
    if (!written) return undo(std::move(written).error());
  }
  for (auto& file : staged) {
    auto committed = file.commit();
    if (!committed)
      return Error::failed(cat(committed.error().message, " (the tree is now partly patched)"));
  }
  for (TreeFile* f : deletions) {
    if (::unlink(f->abs.c_str()) != 0)
      return Error::failed(cat("cannot delete ", f->abs.string(), ": ", std::strerror(errno),
                               " (the tree is now partly patched)"));
    remove_empty_parents(f->abs.parent_path(), root);
  }
  return result;
}

}  // namespace kiln::patch
