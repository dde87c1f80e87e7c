// Unified diffs: parse them strictly, and apply a series to a source tree, all or nothing.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"

namespace kiln::patch {

struct Hunk {
  int old_start = 0, old_count = 0, new_start = 0, new_count = 0;
  // Body lines with their ' ', '-' or '+' prefix, without line ends (a CR before the LF is
  // dropped; an empty body line is stored as " ", an empty context line).
  std::vector<std::string> lines;
  bool old_no_newline = false;  // "\ No newline at end of file" after the last old line
  bool new_no_newline = false;  // ... after the last new line
  int header_line = 0;          // 1-based line of the "@@" header in the patch file

  std::string header() const;  // "@@ -188,27 +188,32 @@"
};

struct FilePatch {
  // After stripping; empty for /dev/null (and for the old side of a diff -N creation, whose
  // timestamp is the epoch).
  std::string old_path, new_path;
  bool creates = false, deletes = false;
  int new_mode = 0;     // from git's "new file mode"/"new mode": 0644 or 0755; 0 keeps the mode
  bool crlf = false;    // most body lines end in CRLF: files it creates get CRLF line ends
  int header_line = 0;  // 1-based line of the "--- " (or "diff --git") line
  std::vector<Hunk> hunks;
};

// Parses a unified diff. Free text before, between and after file diffs is ignored (commit
// messages, "diff -ru" and "Index:" lines, a format-patch signature); "diff --git" blocks with
// index, new/deleted file mode and old/new mode lines are understood; renames, copies and binary
// diffs are rejected. Hunk bodies must match their header counts exactly. Paths lose `strip`
// leading components and must then be relative and stay inside the tree (no "..").
// Errors are Error::bad_input: "patch NAME line N: ...".
Expected<std::vector<FilePatch>> parse(std::string_view text, std::string_view patch_name,
                                       int strip = 1);

struct PatchText {
  std::string name;  // shown in messages, e.g. "0002-arch-list.patch"
  std::string text;
};

struct ApplyResult {
  std::vector<std::string> changed_files;  // relative to the tree, sorted: written or deleted
  // Hunks that applied away from their stated line:
  // "0002-x.patch: setup.py: hunk 1 applied at offset +3 (line 191)".
  std::vector<std::string> notes;
};

// Applies `patches` in order to the directory `tree`, all or nothing: every patch is applied in
// memory first (each on top of the ones before it), and files are written (temp + rename, modes
// kept) only when every hunk of every patch applied. A hunk applies where its header says, or at
// the nearest offset where all its context and removed lines match exactly (GNU patch
// --fuzz=0); never with fuzz. Line ends are compared without the CR of CRLF, and lines the patch
// adds take the target file's line end. Paths that leave the tree (through "..", an absolute
// path or a symlink pointing outside) and symlinks as targets are rejected.
// A hunk that does not apply, a missing target, a creation of an existing file or a malformed
// patch is Error::bad_input naming the patch, file and hunk; a failed write is Error::failed.
Expected<ApplyResult> apply_series(const std::filesystem::path& tree,
                                   const std::vector<PatchText>& patches, int strip = 1);

}  // namespace kiln::patch
