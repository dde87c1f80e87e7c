// kiln fetch PKG… [--target T]… [--offline] [--index-url URL]: download and verify sources (with
// --target, also the files each target pins: torch, toolkit wheels, the setuptools environment's);
// print their paths. kiln fetch --print-sha256 SOURCE… [--index-url URL]: fetch sources nobody has
// pinned yet into the download cache and print their sha256 (and on stderr, the [source] lines).
#include <CLI/CLI.hpp>

#include <iostream>

#include "cache/store.h"
#include "cli/context.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/strings.h"
#include "fetch/print_sha256.h"
#include "fetch/url.h"
#include "init/toml_text.h"
#include "pipeline/pins.h"
#include "pipeline/sources.h"
#include "resolve/plan.h"

namespace kiln::cli {

namespace {

// --target: what a later --offline build of the packages for each target fetches besides their
// sources, from the same list the build uses (pipeline::pinned_files).
void fetch_target_pins(Context& ctx, const std::vector<std::string>& packages,
                       const std::vector<std::string>& target_names, pipeline::Fetching& fetching,
                       nlohmann::json& out, std::size_t& cached) {
  auto targets = ctx.targets(target_names, "");
  resolve::Plan plan = resolve::make_plan(ctx.repository(), packages, targets).value();
  for (const auto& rt : plan.targets) {
    const std::vector<pipeline::PinnedFile> files = pipeline::pinned_files(plan, rt).value();
    for (const auto& file : files) {
      fetch::Fetched got = pipeline::fetch_pinned(fetching, file).value();
      out.push_back({{"target", rt.target.name},
                     {"project", file.project},
                     {"file", file.file},
                     {"path", got.path.string()},
                     {"sha256", file.sha256},
                     {"downloaded", got.downloaded}});
      cached += !got.downloaded;
      if (!ctx.json) std::cout << got.path.string() << "\n";
    }
  }
}

// A line as sha256sum writes it: a name with a backslash has it doubled, the line led by one.
std::string sha256sum_line(const fetch::NewPin& pin) {
  if (pin.file.find('\\') == std::string::npos) return cat(pin.sha256, "  ", pin.file, "\n");
  std::string name;
  for (char c : pin.file) name += c == '\\' ? std::string("\\\\") : std::string(1, c);
  return cat("\\", pin.sha256, "  ", name, "\n");
}

// The [source] table of a manifest that pins what `source` fetched (manifest.cpp's read_source:
// pypi + file + sha256, url + sha256 + size, path + sha256), its strings TOML-encoded.
std::string source_toml(const fetch::NewSource& source, const fetch::NewPin& pin) {
  std::string out = init::toml_comment(fetch::redact_url(source.text)) + "[source]\n";
  switch (source.kind) {
    case fetch::NewSource::Kind::Pypi:
      out += cat("pypi = ", init::toml_string(source.release.name),
                 "\nfile = ", init::toml_string(pin.file), "\n");
      break;
    case fetch::NewSource::Kind::Url:
      // A manifest is shared: credentials in the URL stay out of it (and off the terminal).
      if (fetch::without_userinfo(source.url) != source.url)
        out +=
            init::toml_comment("the URL's user info is left out: a manifest holds no credentials");
      out += cat("url = ", init::toml_string(fetch::without_userinfo(source.url)), "\n");
      break;
    case fetch::NewSource::Kind::Path:
      out += cat("path = ", init::toml_string(source.path.string()), "\n");
      break;
  }
  out += cat("sha256 = \"", pin.sha256, "\"\n");
  if (source.kind == fetch::NewSource::Kind::Url) out += cat("size = ", pin.size, "\n");
  return out;
}

// --print-sha256: each SOURCE fetched into the download cache, its sha256 and file name on stdout
// (sha256sum's format, or a JSON array), the [source] lines that pin it on stderr.
int print_sha256(const Context& ctx, const std::vector<std::string>& sources,
                 const std::string& index_url) {
  std::vector<fetch::NewSource> parsed;  // every argument checked before anything is fetched
  for (const auto& text : sources) parsed.push_back(fetch::parse_new_source(text).value());
  const cache::Store store(ctx.cache_path());
  auto fetching = pipeline::Fetching::create(store, false, index_url).value();
  nlohmann::json out = nlohmann::json::array();
  for (const auto& source : parsed) {
    fetch::NewPin pin = fetch::fetch_new_source(fetching->context(), source).value();
    out.push_back({{"source", fetch::redact_url(source.text)},
                   {"file", pin.file},
                   {"sha256", pin.sha256},
                   {"size", pin.size},
                   {"url", pin.url.empty() ? nlohmann::json(nullptr)
                                           : nlohmann::json(fetch::redact_url(pin.url))},
                   {"path", pin.path.string()}});
    if (!ctx.json) std::cout << sha256sum_line(pin) << std::flush;
    log::raw(source_toml(source, pin));
  }
  if (ctx.json)
    std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}

}  // namespace

std::function<int()> configure_fetch(CLI::App& sub, Context& ctx) {
  struct Options {
    std::vector<std::string> packages, targets, new_sources;
    bool offline = false;
    std::string index_url;
  };
  auto opts = std::make_shared<Options>();
  CLI::Option* packages =
      sub.add_option("packages", opts->packages,
                     "NAME, NAME==VERSION or NAME with specifiers, e.g. 'NAME~=1.6.0'")
          ->type_name(kPackageValue);
  CLI::Option* targets =
      sub.add_option("-t,--target", opts->targets,
                     "Also fetch what a build for this target needs besides sources: its torch "
                     "wheel, toolkit wheels, the setuptools environment (repeatable)")
          ->allow_extra_args(false)
          ->type_name(kTargetValue);
  CLI::Option* offline = sub.add_flag("--offline", opts->offline, "Use the download cache only");
  sub.add_option("--index-url", opts->index_url, "Package index (default: pip's configuration)");
  sub.add_option(
         "--print-sha256", opts->new_sources,
         "Instead of packages: fetch each SOURCE nobody has pinned yet (pypi:NAME==VERSION: "
         "that release's sdist on the index; an http(s):// or file:// URL; a file) into "
         "the download cache and print its sha256 as sha256sum does (--json: an array), "
         "and on stderr the [source] lines that pin it in a manifest")
      ->type_name("SOURCE")
      ->excludes(packages)
      ->excludes(targets)
      ->excludes(offline);
  return [&ctx, opts] {
    if (!opts->new_sources.empty()) {
      if (ctx.offline(false))
        raise(Error::bad_input(
            "--print-sha256 downloads, but offline is set ($KILN_OFFLINE or the configuration)"));
      return print_sha256(ctx, opts->new_sources, ctx.index_url(opts->index_url));
    }
    if (opts->packages.empty())
      raise(Error::bad_input("fetch needs package names, or --print-sha256 SOURCE..."));
    const cache::Store store(ctx.cache_path());
    auto fetching = pipeline::Fetching::create(store, ctx.offline(opts->offline),
                                               ctx.index_url(opts->index_url))
                        .value();
    nlohmann::json out = nlohmann::json::array();
    std::size_t cached = 0;
    for (const auto& spec : opts->packages) {
      const manifest::Manifest* m = ctx.repository().select(spec).value();
      // A git source is checked out into a scratch directory that is removed afterwards; the
      // mirror in the cache is what stays.
      cache::Staging scratch = store.staging("fetch-").value();
      fetch::Fetched got =
          pipeline::fetch_package(*m, *fetching, scratch.path() / "checkout").value();
      std::string where = got.kept.empty() ? got.path.string() : got.kept.string();
      out.push_back({{"package", m->name},
                     {"version", m->version},
                     {"path", where},
                     {"sha256", got.sha256},
                     {"downloaded", got.downloaded}});
      cached += !got.downloaded;
      if (!ctx.json) std::cout << where << "\n";
    }
    nlohmann::json pinned = nlohmann::json::array();
    if (!opts->targets.empty())
      fetch_target_pins(ctx, opts->packages, opts->targets, *fetching, pinned, cached);
    if (ctx.json)
      std::cout << nlohmann::json{{"items", out},
                                  {"pinned", pinned},
                                  {"fetches", fetching->downloads()}}
                       .dump(2)
                << "\n";
    else
      log::info(
          cat(out.size() + pinned.size() - cached, " downloaded, ", cached, " from the cache"));
    return 0;
  };
}

}  // namespace kiln::cli
