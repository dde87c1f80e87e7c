#include "compile/content_key.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/log.h"
#include "core/strings.h"

namespace kiln::compile {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::size_t kMaxDepfileBytes = std::size_t{16} << 20;
constexpr std::size_t kMaxPath = 4096;
constexpr std::string_view kManifestFormat = "kiln-deps 1";

// The words of a dependency file, escapes undone, continuations joined.
std::vector<std::string> depfile_words(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (c == '\\' && (next == '\n' || (next == '\r' && i + 2 < text.size() &&
                                       text[i + 2] == '\n'))) {  // a continuation
      i += next == '\n' ? 1 : 2;
      flush();
    } else if (c == '\\' && (next == ' ' || next == '#')) {
      word += next;
      ++i;
    } else if (c == '$' && next == '$') {
      word += '$';
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      flush();
    } else {
      word += c;
    }
  }
  flush();
  return words;
}

}  // namespace

Expected<std::vector<std::string>> parse_depfile(std::string_view text) {
  if (text.size() > kMaxDepfileBytes) return Error::failed("a dependency file over 16 MiB");
  std::vector<std::string> paths;
  bool in_rule = false;
  for (std::string& w : depfile_words(text)) {
    if (w == ":") {
      in_rule = true;
      continue;
    }
    if (w.ends_with(':')) {  // a rule's target (the first, or -MP's phony ones)
      in_rule = true;
      continue;
    }
    if (!in_rule) continue;  // a target written apart from its colon
    if (w.size() > kMaxPath) return Error::failed("a dependency file names a path over 4096 bytes");
    paths.push_back(std::move(w));
    if (paths.size() > kMaxDepFiles) return Error::failed("a dependency file names too many files");
  }
  if (!in_rule) return Error::failed("not a dependency file: no rule");
  std::sort(paths.begin(), paths.end());
  paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
  return paths;
}

std::optional<std::string> FileHasher::sha256(const std::string& path) {
  auto it = known_.find(path);
  if (it != known_.end()) return it->second;
  std::optional<std::string> digest;
  const fs::path full = fs::path(path).is_absolute() ? fs::path(path) : cwd_ / path;
  // O_NONBLOCK: a FIFO named by a stranger's manifest must not hang the build.
  const int fd = ::open(full.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  struct stat st {};
  if (fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<std::size_t>(st.st_size) <= kMaxFileBytes) {
    Sha256 h;
    char buffer[1 << 16];
    ssize_t n = 0;
    std::size_t total = 0;
    while ((n = ::read(fd, buffer, sizeof buffer)) > 0 && total <= kMaxFileBytes) {
      h.update(buffer, static_cast<std::size_t>(n));
      total += static_cast<std::size_t>(n);
    }
    if (n == 0 && total <= kMaxFileBytes) digest = h.hex_digest();
  }
  if (fd >= 0) ::close(fd);
  known_.emplace(path, digest);
  return digest;
}

std::string render_manifest(const std::vector<Deps>& candidates) {
  json out = {{"format", kManifestFormat}, {"candidates", json::array()}};
  for (const auto& deps : candidates) {
    json files = json::array();
    for (const auto& [path, sha] : deps) files.push_back({path, sha});
    out["candidates"].push_back(std::move(files));
  }
  return out.dump();
}

namespace {

std::optional<Deps> parse_candidate(const json& files) {
  if (!files.is_array() || files.size() > kMaxDepFiles) return std::nullopt;
  Deps deps;
  for (const auto& f : files) {
    if (!f.is_array() || f.size() != 2 || !f[0].is_string() || !f[1].is_string())
      return std::nullopt;
    const auto& path = f[0].get_ref<const std::string&>();
    const auto& sha = f[1].get_ref<const std::string&>();
    if (path.empty() || path.size() > kMaxPath || path.find('\0') != std::string::npos ||
        !is_sha256_hex(sha))
      return std::nullopt;
    deps.emplace_back(path, sha);
  }
  if (!std::is_sorted(deps.begin(), deps.end())) return std::nullopt;
  return deps;
}

}  // namespace

std::optional<std::vector<Deps>> parse_manifest(std::string_view text) {
  json doc = parse_json(text);
  if (!doc.is_object() || doc.value("format", "") != kManifestFormat) return std::nullopt;
  auto it = doc.find("candidates");
  if (it == doc.end() || !it->is_array() || it->size() > kMaxCandidates) return std::nullopt;
  std::vector<Deps> out;
  for (const auto& files : *it) {
    auto deps = parse_candidate(files);
    if (!deps) return std::nullopt;
    out.push_back(std::move(*deps));
  }
  return out;
}

std::string content_key(const std::string& command_key, const Deps& deps) {
  Sha256 h;
  h.update(cat("kiln-content 1\n", command_key, "\n"));
  for (const auto& [path, sha] : deps) {
    h.update(path);
    h.update(std::string_view("\0", 1));
    h.update(cat(sha, "\n"));
  }
  return h.hex_digest();
}

Deps merge_deps(const Deps& a, const Deps& b) {
  Deps out;
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  out.erase(std::unique(out.begin(), out.end(),
                        [](const auto& x, const auto& y) { return x.first == y.first; }),
            out.end());
  return out;
}

std::vector<Deps> ContentKeys::candidates(const std::string& command_key, bool peek) {
  auto text = peek ? cache_.peek_manifest(command_key) : cache_.load_manifest(command_key);
  if (!text) return {};
  auto parsed = parse_manifest(*text);
  if (!parsed)
    log::verbose(cat("object cache: the manifest ", command_key, " is damaged; ignored"));
  return parsed.value_or(std::vector<Deps>{});
}

const std::vector<Deps>& ContentKeys::shared_candidates(const std::string& command_key) {
  auto known = shared_.find(command_key);
  if (known != shared_.end()) return known->second;
  auto text = cache_.load_shared_manifest(command_key);
  auto parsed = text ? parse_manifest(*text) : std::nullopt;
  return shared_.emplace(command_key, parsed.value_or(std::vector<Deps>{})).first->second;
}

std::optional<Keyed> ContentKeys::match(const std::string& command_key,
                                        const std::vector<Deps>& sets, std::string& why) {
  for (const Deps& deps : sets) {
    std::optional<std::string> now;
    auto changed = std::find_if(deps.begin(), deps.end(), [&](const auto& d) {
      now = hasher_.sha256(d.first);
      return now != d.second;
    });
    if (changed == deps.end()) return Keyed{content_key(command_key, deps), deps};
    if (why.empty()) why = cat(changed->first, now ? " changed" : " is gone");
  }
  return std::nullopt;
}

std::optional<Keyed> ContentKeys::lookup(const std::string& command_key, const std::string& label) {
  return find(command_key, label, false);
}

std::optional<Keyed> ContentKeys::probe(const std::string& command_key, const std::string& label) {
  return find(command_key, label, true);
}

std::optional<Keyed> ContentKeys::find(const std::string& command_key, const std::string& label,
                                       bool peek) {
  std::string why;
  if (auto hit = match(command_key, candidates(command_key, peek), why)) return hit;
  // Another worker may have recorded the set that matches here (the local copy of the remote's
  // manifest is only made when there is no local one).
  if (auto hit = match(command_key, shared_candidates(command_key), why)) return hit;
  if (!why.empty() && !label.empty()) log::verbose(cat(label, ": compiled again: ", why));
  return std::nullopt;
}

Expected<Deps> ContentKeys::read(const fs::path& depfile) {
  KILN_TRY(std::string text, read_file(depfile));
  auto paths = parse_depfile(text);
  if (!paths) return Error::failed(cat(depfile.string(), ": ", paths.error().message));
  Deps deps;
  for (const auto& p : *paths) {
    auto sha = hasher_.sha256(p);
    if (!sha) return Error::failed(cat(depfile.string(), ": cannot hash ", p));
    deps.emplace_back(p, *sha);
  }
  return deps;
}

Expected<Keyed> ContentKeys::record(const std::string& command_key,
                                    const std::vector<fs::path>& depfiles, const Deps& extra) {
  Deps deps;
  for (const auto& file : depfiles) {
    KILN_TRY(Deps these, read(file));
    deps = merge_deps(deps, these);
  }
  deps = merge_deps(deps, extra);
  // Newest first, then this cache's sets, then the remote's (so that storing it there keeps the
  // other workers' sets), each once.
  std::vector<Deps> all = {deps};
  auto keep = [&all](const Deps& old) {
    if (all.size() < kMaxCandidates && std::find(all.begin(), all.end(), old) == all.end())
      all.push_back(old);
  };
  for (const auto& old : candidates(command_key)) keep(old);
  for (const auto& old : shared_candidates(command_key)) keep(old);
  KILN_CHECK(cache_.store_manifest(command_key, render_manifest(all)));
  return Keyed{content_key(command_key, deps), std::move(deps)};
}

}  // namespace kiln::compile
