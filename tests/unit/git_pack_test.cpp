// fetch/git_pack: a pack as it arrives, checked before libgit2's indexer takes it. Packs made
// here byte by byte (entries of each kind, a delta that makes a 1.5 GB object, lies about sizes)
// and a real one from `git pack-objects`, fed whole, a byte at a time and in odd chunks.
#include "fetch/git_pack.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include "../support/fetch_util.h"
#include "core/fs.h"
#include "core/process.h"
#include "core/strings.h"
#include "fetch/url.h"

namespace kiln::fetch {
namespace {

constexpr PackLimits kLimits{1 << 20, 1 << 16, 100};

std::string deflate(std::string_view data) {
  uLongf size = compressBound(data.size());
  std::string out(size, '\0');
  compress2(reinterpret_cast<Bytef*>(out.data()), &size,
            reinterpret_cast<const Bytef*>(data.data()), data.size(), 6);
  out.resize(size);
  return out;
}

// An entry's type-and-size header, as git writes it.
std::string entry_header(int type, std::uint64_t size) {
  std::string out;
  unsigned char c = static_cast<unsigned char>((type << 4) | (size & 15));
  size >>= 4;
  while (size) {
    out += static_cast<char>(c | 0x80);
    c = size & 0x7f;
    size >>= 7;
  }
  return out + static_cast<char>(c);
}

std::string varint(std::uint64_t v) {  // a delta's sizes: little-endian base 128
  std::string out;
  do {
    unsigned char c = v & 0x7f;
    v >>= 7;
    out += static_cast<char>(v ? c | 0x80 : c);
  } while (v);
  return out;
}

std::string pack(const std::vector<std::string>& entries, std::uint32_t count) {
  std::string out = "PACK";
  for (std::uint32_t v : {2u, count})
    for (int shift : {24, 16, 8, 0}) out += static_cast<char>((v >> shift) & 0xff);
  for (const auto& e : entries) out += e;
  return out + std::string(20, '\x5a');  // the trailer (the indexer checks the checksum)
}

std::string blob(std::string_view data) {
  return entry_header(3, data.size()) + deflate(data);
}

// An OFS_DELTA (its base 133 bytes before it) of `delta`'s bytes.
std::string ofs_delta(const std::string& delta) {
  return entry_header(6, delta.size()) + "\x81\x05" + deflate(delta);
}

// Bytes zlib cannot shrink.
std::string noise(std::size_t n) {
  std::string out;
  std::uint32_t x = 12345;
  for (std::size_t i = 0; i < n; ++i) out += static_cast<char>((x = x * 1103515245 + 12345) >> 24);
  return out;
}

// A REF_DELTA against `base` whose result is `result_size` bytes (one copy of the base, repeated
// in the instructions would make it: only the header matters here).
std::string ref_delta(std::uint64_t base_size, std::uint64_t result_size) {
  std::string delta =
      varint(base_size) + varint(result_size) + std::string("\x91\x00\x10", 3);  // copy 16 bytes
  return entry_header(7, delta.size()) + std::string(20, '\x01') + deflate(delta);
}

std::string verdict(PackScanner& s, std::string_view bytes, std::size_t chunk) {
  for (std::size_t at = 0; at < bytes.size(); at += chunk)
    if (auto r = s.feed(bytes.substr(at, chunk)); !r) return r.error().message;
  auto r = s.finish();
  return r ? "ok" : r.error().message;
}

std::string verdict(std::string_view bytes, std::size_t chunk = 1 << 20, PackLimits l = kLimits) {
  PackScanner s(l);
  return verdict(s, bytes, chunk);
}

TEST(GitPack, ReadsEveryEntryKindInAnyChunking) {
  std::string p = pack({blob("hello\n"), entry_header(1, 4) + deflate("tree"),
                        ofs_delta(varint(6) + varint(6) + "\x90"), ref_delta(6, 60000)},
                       4);
  for (std::size_t chunk : {std::size_t{1}, std::size_t{3}, std::size_t{7}, p.size()}) {
    PackScanner s(kLimits);
    EXPECT_EQ(verdict(s, p, chunk), "ok") << chunk;
    EXPECT_EQ(s.objects(), 4u);
    EXPECT_EQ(s.bytes(), p.size());
    EXPECT_EQ(s.largest_object(), 60000u);
  }
  EXPECT_EQ(verdict(pack({}, 0)), "ok");
}

TEST(GitPack, RefusesWhatPassesALimitBeforeItIsInflated) {
  // A blob stated larger than the limit: refused from its header, before its data.
  PackScanner s(kLimits);
  std::string head = pack({}, 1);
  head.resize(12);
  EXPECT_EQ(s.feed(head + entry_header(3, 1500000000)).error().message,
            "object 1 of the pack (blob) is 1500000000 bytes, over the limit of 65536 bytes");
  // A delta of a few bytes that would make 1.5 GB.
  EXPECT_EQ(verdict(pack({blob("base"), ref_delta(4, 1500000000)}, 2), 1),
            "object 2 of the pack (the object a delta makes) is 1500000000 bytes, over the limit "
            "of 65536 bytes");
  EXPECT_EQ(verdict(pack({}, 101)), "the pack holds 101 objects, over the limit of 100");
  EXPECT_EQ(verdict(pack({blob(noise(2000))}, 1), 1 << 20, PackLimits{1000, 1 << 16, 100}),
            "the pack is larger than the limit of 1000 bytes");
}

TEST(GitPack, RefusesPacksThatLie) {
  EXPECT_EQ(verdict("PACX" + pack({}, 0).substr(4)),
            "not a git pack (no PACK header of version 2 or 3)");
  EXPECT_EQ(verdict(entry_header(3, 9) + deflate("123456789")),
            "not a git pack (no PACK header of version 2 or 3)");
  EXPECT_EQ(verdict(pack({entry_header(3, 3) + deflate("longer")}, 1)),
            "object 1 of the pack inflates past its stated size of 3 bytes");
  EXPECT_EQ(verdict(pack({entry_header(3, 9) + deflate("short")}, 1)),
            "object 1 of the pack inflates to 5 bytes, not its stated 9");
  EXPECT_EQ(verdict(pack({entry_header(3, 4) + "garbage!"}, 1)),
            "object 1 of the pack does not inflate (zlib -3)");
  EXPECT_EQ(verdict(pack({entry_header(5, 1) + deflate("x")}, 1)), "object 1 has no valid type");
  EXPECT_EQ(verdict(pack({entry_header(7, 1) + std::string(20, 'b') + deflate("\x80")}, 1)),
            "object 1 of the pack is a delta without its sizes");
  std::string p = pack({blob("a")}, 2);
  EXPECT_EQ(verdict(p), "object 2 has no valid type");  // the trailer read as an entry
  p = pack({blob("a")}, 1);
  EXPECT_EQ(verdict(p.substr(0, p.size() - 1)), "the pack ends early (1 of 1 objects)");
  EXPECT_EQ(verdict(p + "x"), "bytes after the pack's end");
  EXPECT_EQ(verdict(pack({std::string("\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80", 10)}, 1)),
            "object 1 of the pack has an overlong size");
  // After a refusal every call fails the same way.
  PackScanner s(kLimits);
  EXPECT_FALSE(s.feed("PACX" + std::string(8, '\0')));
  EXPECT_FALSE(s.feed(""));
  EXPECT_EQ(s.finish().error().message, "not a git pack (no PACK header of version 2 or 3)");
}

TEST(GitPack, ReadsAPackGitMade) {
  if (find_program("git").empty()) GTEST_SKIP() << "git is not installed";
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-pack-").value();
  run_capture({"git", "init", "-q", dir.path().string()}).value();
  std::string a(40000, 'a'), b = a + "one more line\n";
  kiln::testing::write_text(dir.path() / "a", a);
  std::string oid_a = std::string(
      trim(run_capture({"git", "-C", dir.path().string(), "hash-object", "-w", "a"}).value()));
  kiln::testing::write_text(dir.path() / "a", b);
  std::string oid_b = std::string(
      trim(run_capture({"git", "-C", dir.path().string(), "hash-object", "-w", "a"}).value()));
  kiln::testing::write_text(dir.path() / "list", oid_a + "\n" + oid_b + "\n");
  std::string packed =
      run_capture({"sh", "-c",
                   "git -C '" + dir.path().string() + "' pack-objects --stdout < '" +
                       (dir.path() / "list").string() + "'"})
          .value();
  for (std::size_t chunk : {std::size_t{1}, std::size_t{4096}, packed.size()}) {
    PackScanner s(kLimits);
    EXPECT_EQ(verdict(s, packed, chunk), "ok");
    EXPECT_EQ(s.objects(), 2u);
    EXPECT_EQ(s.largest_object(), b.size());
  }
}

TEST(GitUrl, LocalOrRemoteAsGitReachesIt) {
  for (const char* local :
       {"/srv/git/x.git", "x", "../x.git", "~/x", "file:///srv/x.git", "FILE:///srv/x",
        "ext::sh -c touch% /tmp/pwned", "fd::17", "foo::bar", "./sub"})
    EXPECT_TRUE(is_local_git_url(local)) << local;
  for (const char* remote :
       {"https://github.com/a/b.git", "HTTP://h/x", "git://h/x", "ssh://git@h/x", "git+ssh://h/x",
        "git@github.com:a/b.git", "host:path/x"})
    EXPECT_FALSE(is_local_git_url(remote)) << remote;
}

}  // namespace
}  // namespace kiln::fetch
