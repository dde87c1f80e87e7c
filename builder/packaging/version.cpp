#include "packaging/version.h"

#include <algorithm>
#include <cctype>

#include "core/strings.h"

namespace kiln::packaging {

namespace {

// A run of digits without its leading zeros ("0" stays).
std::string number(std::string_view digits) {
  while (digits.size() > 1 && digits[0] == '0') digits.remove_prefix(1);
  return std::string(digits);
}

// Two numbers without leading zeros by value, of any length: the longer is larger, else the first
// differing digit decides. < 0, 0, > 0.
int compare_numbers(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

bool is_number(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_ascii_digit);
}

// Release numbers compared as if padded with zeros.
int compare_release(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    std::string_view x = i < a.size() ? std::string_view(a[i]) : std::string_view("0");
    std::string_view y = i < b.size() ? std::string_view(b[i]) : std::string_view("0");
    if (int c = compare_numbers(x, y)) return c;
  }
  return 0;
}

// PEP 440 local labels: segment by segment, numbers by value and after words, words as text; a
// label that is a prefix of a longer one first; no label before any.
int compare_local(const std::string& a, const std::string& b) {
  if (a == b) return 0;
  if (a.empty() || b.empty()) return a.empty() ? -1 : 1;
  auto pa = split(a, "."), pb = split(b, ".");
  for (std::size_t i = 0; i < std::min(pa.size(), pb.size()); ++i) {
    bool na = is_number(pa[i]), nb = is_number(pb[i]);
    if (na != nb) return na ? 1 : -1;
    int c = na ? compare_numbers(pa[i], pb[i]) : pa[i].compare(pb[i]);
    if (c != 0) return c < 0 ? -1 : 1;
  }
  return pa.size() < pb.size() ? -1 : pa.size() > pb.size() ? 1 : 0;
}

}  // namespace

// packaging's version pattern, compiled with re.IGNORECASE, each optional part taken possessively
// (a part that starts is kept) as its ?+ and *+ quantifiers take it: v? (N!)? N(.N)* then
// [-_.]?(alpha|a|beta|b|preview|pre|c|rc)[-_.]?N?, (-N|[-_.]?(post|rev|r)[-_.]?N?),
// [-_.]?dev[-_.]?N?, +local. Records what it takes into `v`.
struct VersionParser {
  std::string_view t;
  std::size_t p = 0;
  Version v;

  char peek(std::size_t ahead = 0) const { return p + ahead < t.size() ? t[p + ahead] : '\0'; }
  bool skip_ci(std::string_view word) {
    if (t.size() - p < word.size()) return false;
    for (std::size_t i = 0; i < word.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(t[p + i])) != word[i]) return false;
    p += word.size();
    return true;
  }
  std::string_view digits() {
    std::size_t start = p;
    while (is_ascii_digit(peek())) ++p;
    return t.substr(start, p - start);
  }
  bool separator() {  // [-_.]
    if (peek() != '-' && peek() != '_' && peek() != '.') return false;
    ++p;
    return true;
  }
  // [-_.]?N?, the number 0 when absent.
  std::string implicit_number() {
    separator();
    std::string_view n = digits();
    return n.empty() ? "0" : number(n);
  }

  bool epoch_and_release(VersionForm form) {
    skip_ci("v");
    std::size_t start = p;
    std::string_view n = digits();
    if (!n.empty() && peek() == '!') {
      ++p;
      v.epoch_ = number(n);
    } else {
      p = start;
    }
    n = digits();
    if (n.empty()) return false;
    v.release_.push_back(number(n));
    while (peek() == '.' && is_ascii_digit(peek(1))) {
      ++p;
      v.release_.push_back(number(digits()));
    }
    return form != VersionForm::Compatible || v.release_.size() >= 2;
  }

  void pre_release() {
    static constexpr std::string_view kWords[] = {"alpha",   "a",   "beta", "b",
                                                  "preview", "pre", "c",    "rc"};
    static constexpr int kKinds[] = {0, 0, 1, 1, 2, 2, 2, 2};
    std::size_t save = p;
    separator();
    for (std::size_t i = 0; i < std::size(kWords); ++i)
      if (skip_ci(kWords[i])) {
        v.pre_kind_ = kKinds[i];
        v.pre_ = implicit_number();
        return;
      }
    p = save;
  }

  void post_release() {
    std::size_t save = p;
    if (peek() == '-' && is_ascii_digit(peek(1))) {
      ++p;
      v.post_ = number(digits());
      return;
    }
    separator();
    if (skip_ci("post") || skip_ci("rev") || skip_ci("r"))
      v.post_ = implicit_number();
    else
      p = save;
  }

  void dev_release() {
    std::size_t save = p;
    separator();
    if (skip_ci("dev"))
      v.dev_ = implicit_number();
    else
      p = save;
  }

  // +[a-z0-9]+([-_.][a-z0-9]+)*, normalised: lower case, '.' between segments, numbers without
  // leading zeros.
  void local_label() {
    if (peek() != '+' || !is_ascii_alnum(peek(1))) return;
    ++p;
    std::vector<std::string> parts;
    while (true) {
      std::size_t start = p;
      while (is_ascii_alnum(peek())) ++p;
      std::string part = lower(t.substr(start, p - start));
      parts.push_back(is_number(part) ? number(part) : part);
      if (!(peek() == '-' || peek() == '_' || peek() == '.') || !is_ascii_alnum(peek(1))) break;
      ++p;
    }
    v.local_ = join(parts, ".");
  }

  std::size_t match(VersionForm form, bool* wildcard) {
    if (!epoch_and_release(form)) return 0;
    if (form == VersionForm::Equality && peek() == '.' && peek(1) == '*') {
      if (wildcard) *wildcard = true;
      return p += 2;
    }
    pre_release();
    post_release();
    dev_release();
    if (form == VersionForm::Plain || form == VersionForm::Equality) local_label();
    return p;
  }
};

bool is_py_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f');
}

std::size_t match_version(std::string_view text, VersionForm form, Version* out, bool* wildcard) {
  if (wildcard) *wildcard = false;
  VersionParser parser{text};
  std::size_t taken = parser.match(form, wildcard);
  if (taken && out) *out = std::move(parser.v);
  return taken;
}

std::optional<Version> Version::parse(std::string_view text) {
  while (!text.empty() && is_py_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_py_space(text.back())) text.remove_suffix(1);
  Version v;
  if (text.empty() || match_version(text, VersionForm::Plain, &v) != text.size())
    return std::nullopt;
  return v;
}

std::string Version::str() const {
  std::string out = epoch_ == "0" ? std::string() : cat(epoch_, "!");
  out += join(release_, ".");
  if (pre_kind_ >= 0) out += cat(pre_kind_ == 0 ? "a" : pre_kind_ == 1 ? "b" : "rc", pre_);
  if (!post_.empty()) out += cat(".post", post_);
  if (!dev_.empty()) out += cat(".dev", dev_);
  if (!local_.empty()) out += cat("+", local_);
  return out;
}

Version Version::public_version() const {
  Version v = *this;
  v.local_.clear();
  return v;
}

Version Version::release_prefix(std::size_t n) const {
  Version v;
  v.epoch_ = epoch_;
  for (std::size_t i = 0; i < n; ++i) v.release_.push_back(i < release_.size() ? release_[i] : "0");
  return v;
}

int compare(const Version& a, const Version& b) {
  if (int c = compare_numbers(a.epoch_, b.epoch_)) return c;
  if (int c = compare_release(a.release_, b.release_)) return c;
  // A dev release of no pre- or post-release sorts before every pre-release of its release; a
  // version with no pre-release after them all.
  auto pre_kind = [](const Version& v) {
    if (v.pre_kind_ < 0 && v.post_.empty() && !v.dev_.empty()) return -1;
    return v.pre_kind_ < 0 ? 3 : v.pre_kind_;
  };
  if (pre_kind(a) != pre_kind(b)) return pre_kind(a) < pre_kind(b) ? -1 : 1;
  if (int c = compare_numbers(a.pre_, b.pre_)) return c;
  // No post release first; no dev release last.
  if (a.post_.empty() != b.post_.empty()) return a.post_.empty() ? -1 : 1;
  if (int c = compare_numbers(a.post_, b.post_)) return c;
  if (a.dev_.empty() != b.dev_.empty()) return a.dev_.empty() ? 1 : -1;
  if (int c = compare_numbers(a.dev_, b.dev_)) return c;
  return compare_local(a.local_, b.local_);
}

bool is_version(std::string_view text) {
  return Version::parse(text).has_value();
}

bool is_canonical_version(std::string_view text) {
  auto v = Version::parse(text);
  return v && !v->has_local() && v->str() == text;
}

int compare_versions(std::string_view a, std::string_view b) {
  auto x = Version::parse(a), y = Version::parse(b);
  if (x && y) return compare(*x, *y);
  if (x || y) return x ? 1 : -1;
  int c = a.compare(b);
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

bool version_less(std::string_view a, std::string_view b) {
  int c = compare_versions(a, b);
  return c != 0 ? c < 0 : a < b;
}

}  // namespace kiln::packaging
