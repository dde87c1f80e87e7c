// `kiln serve`'s request handler, index::handle(): any method, path and headers against a model of
// a few wheels. Input: "METHOD PATH" on the first line, then "Name: value" header lines; a first
// byte with its low bit set asks for a token, its second bit for routes (kiln's own names, a
// fallback and a target's torch index). Responses stay well-formed: a real status, file slices
// inside the file, never a file outside the model's entries, and a redirect upstream only to an
// upstream's project page of a plain normalised name.
#include "fuzz.h"
#include "index/http.h"

using kiln::fuzz::fail;
namespace idx = kiln::index;

namespace {

std::string metadata(const std::string& name, const std::string& version) {
  return "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version +
         "\nRequires-Python: >=3.9\n\nA description.\n";
}

const idx::IndexModel& model() {
  static const idx::IndexModel m = [] {
    std::vector<idx::WheelEntry> entries;
    auto add = [&](const std::string& target, const std::string& key, const std::string& file,
                   const std::string& name, const std::string& version) {
      idx::WheelEntry e;
      e.target = target;
      e.key = key;
      e.filename = file;
      e.sha256 = std::string(64, 'a' + static_cast<char>(entries.size()));
      e.size = 1000 + entries.size();
      e.committed_at = 1700000000 + static_cast<std::int64_t>(entries.size());
      e.dir = "/nonexistent/cache/wheels/" + key;
      e.metadata = metadata(name, version);
      entries.push_back(std::move(e));
    };
    add("default", "k1", "causal_conv1d-1.7.0+cu130torch2.11-cp311-cp311-manylinux_2_34_x86_64.whl",
        "causal-conv1d", "1.7.0+cu130torch2.11");
    add("default", "k2", "flash_linear_attention-0.6.0-py3-none-any.whl", "flash-linear-attention",
        "0.6.0");
    add("default-sm90-sm120-ptx120", "k3",
        "kiln_demo-0.1.0+cu130torch2.11-cp311-cp311-manylinux_2_34_x86_64.whl", "kiln-demo",
        "0.1.0+cu130torch2.11");
    return idx::build_model(std::move(entries));
  }();
  return m;
}

}  // namespace

KILN_FUZZ_TARGET(http) {
  std::string_view in = kiln::fuzz::text(data, size);
  idx::HandlerOptions options;
  unsigned char flags = in.empty() ? 0 : static_cast<unsigned char>(in[0]);
  if (flags & 1) options.token = "tok";
  if (flags & 2) {
    options.routes.own = {"fla-core", "kiln"};
    options.routes.fallback = "https://pypi.example/simple/";
    options.routes.targets["cu128"] = {"https://torch.example/whl/cu128/", {"torch", "triton"}};
  }
  if (!in.empty()) in.remove_prefix(1);
  idx::Request req;
  std::size_t pos = 0;
  bool first = true;
  while (pos <= in.size()) {
    std::size_t end = in.find('\n', pos);
    if (end == std::string_view::npos) end = in.size();
    std::string_view line = in.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (first) {
      auto sp = line.find(' ');
      req.method = std::string(line.substr(0, sp));
      req.path = sp == std::string_view::npos ? "" : std::string(line.substr(sp + 1));
      first = false;
    } else if (auto colon = line.find(':'); colon != std::string_view::npos) {
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      req.headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
    }
    pos = end + 1;
  }
  idx::Response r = idx::handle(req, model(), options);
  if (r.status < 100 || r.status > 599) fail("a status outside 100..599");
  if (r.status == 307) {
    std::string location = r.header("Location");
    std::string_view rest = location;
    for (std::string_view up : {"https://pypi.example/simple/", "https://torch.example/whl/cu128/"})
      if (rest.starts_with(up)) rest.remove_prefix(up.size());
    if (rest.size() == location.size() || !rest.ends_with('/'))
      fail("a redirect to something else than an upstream's project page: " + location);
    rest.remove_suffix(1);
    if (!idx::is_project_name(rest)) fail("a redirect for a name that is not plain: " + location);
  }
  if (r.file) {
    if (r.status != 200 && r.status != 206) fail("a file body with another status than 200 or 206");
    const idx::File* known = nullptr;
    for (const auto& [name, target] : model().targets)
      for (const auto& [pname, project] : target.projects)
        if (const auto* f = project.find(r.file->filename); f && f->dir == r.file->dir) known = f;
    if (!known)
      fail("a file that is not one of the model's wheels: " +
           (r.file->dir / r.file->filename).string());
    if (r.file->file_size != known->size) fail("a file slice with another size than the wheel's");
    if (r.file->offset > r.file->file_size || r.file->length > r.file->file_size - r.file->offset)
      fail("a file slice outside the file");
  }
  // The helpers on their own.
  (void)idx::negotiate(req.header("Accept"));
  idx::ByteRange range;
  if (idx::parse_range(req.header("Range"), 1000, range) == idx::RangeResult::Partial &&
      (range.first > range.last || range.last >= 1000))
    fail("a partial range outside the representation");
  bool trailing = false;
  if (auto segments = idx::split_path(req.path, trailing))
    for (const auto& s : *segments)
      if (s == "." || s == ".." || s.find('/') != std::string::npos ||
          s.find('\0') != std::string::npos)
        fail("split_path() let a dangerous segment through: " + s);
  return 0;
}
