// `kiln target init --torch VERSION`: a fully pinned target written from a package index alone,
// without installing torch and without a GPU. The torch wheels of every CPython ABI the index has
// for that version, with their sha256; torch's CUDA from the wheel's own metadata (PEP 658 when the
// index serves it, else the wheel's METADATA and torch/version.py); the compiler's toolkit as its
// own choice (NVIDIA's wheels at torch's pinned release, the system's, or Debian's packages); the
// archs, given or read from torch's own libtorch_cuda.so; refused when that toolkit cannot build
// them.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/expected.h"
#include "fetch/source.h"
#include "fetch/url.h"
#include "manifest/arch.h"

namespace kiln::init {

struct IndexRequest {
  std::string torch_version;             // "2.15.0", "2.11.0+cu128"
  std::string torch_index;               // the index torch's wheels are on
  bool write_index = false;              // pin torch_index in the target (it was given)
  std::string cuda_index;                // the index NVIDIA's CUDA wheels are on
  std::vector<std::string> python_tags;  // "cp312", "cp313t"; empty: every one the index has
  std::string archs = "9.0";             // an arch spec, or "torch": the archs torch carries
  std::string toolkit;                   // "system", "wheels", "debian"; "": by torch's CUDA
  std::string name;                      // "": torch<version>-cu<label digits>
  std::string prefer_tag;                // the wheel to read when one must be read ("cp311")
};

struct IndexTarget {
  std::string name;
  std::string text;      // the target file
  nlohmann::json facts;  // what was found and where from (for --json and the log)
};

// `downloader`: the download cache (a wheel read for its facts stays there, as a build would fetch
// it); a read wheel's torch is unpacked once into the sysroots of the downloader's cache.
Expected<IndexTarget> target_from_index(const IndexRequest& request, fetch::Downloader& downloader);

// The torch wheels of `version` on a project page for Linux x86_64 CPython, one per ABI tag
// ("cp311", "cp313t"), sorted by tag; `tags` narrows them (an asked tag the index lacks is an
// error).
struct TorchFile {
  std::string python_tag;
  fetch::IndexFile file;
};
Expected<std::vector<TorchFile>> torch_files(const std::vector<fetch::IndexFile>& page,
                                             const std::string& version,
                                             const std::vector<std::string>& tags);

// The SASS and PTX archs of an ELF file's fat binaries (`--archs torch`: torch's libtorch_cuda.so).
Expected<manifest::ArchList> archs_of_library(const std::filesystem::path& library);

}  // namespace kiln::init
