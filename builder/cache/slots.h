// The cache's growing inputs, written in place under a lock on their own directory (DirLock):
// one file of the download cache (a partial download resumes) and a git mirror (each fetch adds
// to it). Store hands them out locked; the holder writes what the handle names, nothing else.
#pragma once

#include <filesystem>
#include <string_view>

#include "cache/dir_lock.h"
#include "core/expected.h"

namespace kiln::cache {

// A partial download: "<file>.part" beside where its bytes go (a name no pinned file may have).
inline constexpr std::string_view kPartialSuffix = ".part";

// <cache>/downloads/<sha256[0:2]>/<sha256>/<filename>, locked while held.
class DownloadSlot {
 public:
  // Where the verified bytes go.
  const std::filesystem::path& file() const { return file_; }
  // Where the holder writes them first: <file>.part, which a later holder resumes.
  std::filesystem::path partial() const;
  // The partial file, complete and verified by the holder, as file(): synced, renamed, the
  // directory synced.
  Expected<void> publish() const;
  // Whether another process put the file there before this one got the lock.
  bool complete() const;
  // After a failure: removes the <sha256> and <sha256[0:2]> directories when they are empty.
  void abandon() const;

 private:
  friend class Store;
  DownloadSlot(DirLock lock, std::filesystem::path file)
      : lock_(std::move(lock)), file_(std::move(file)) {}
  DirLock lock_;
  std::filesystem::path file_;
};

// <cache>/git/<sha256 of the URL>: a bare repository for libgit2, locked while held.
class GitMirror {
 public:
  const std::filesystem::path& path() const { return path_; }
  // Empties the mirror (a damaged one, made again); the lock stays held.
  void empty() const;
  // Removes a mirror this process made and could not fill (another process waiting for the lock
  // sees the directory gone and takes a new one).
  void remove() const;

 private:
  friend class Store;
  GitMirror(DirLock lock, std::filesystem::path path)
      : lock_(std::move(lock)), path_(std::move(path)) {}
  DirLock lock_;
  std::filesystem::path path_;
};

}  // namespace kiln::cache
