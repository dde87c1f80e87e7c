// kiln verify WHEEL|URL|DIR… --key PUB [--attestation FILE] [--junit FILE] [--offline]
//             [--index-url URL]
// Checks each wheel's signed attestation (attest/wheel.h, docs/verify.md): signed by the key,
// vouching for the wheel's sha256 and name, with the predicate its kiln.json gives.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>

#include "attest/wheel.h"
#include "cache/entry.h"
#include "cli/context.h"
#include "cli/reports.h"
#include "cli/wheel_source.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/strings.h"
#include "core/terminal.h"
#include "fetch/url.h"
#include "validate/validate.h"

namespace kiln::cli {

namespace fs = std::filesystem;

namespace {

struct VerifyArgs {
  std::vector<std::string> wheels;
  std::string key, attestation, junit, index_url;
  bool offline = false;
};

// One wheel to check: where its bytes are, the name it goes by, and its attestation's text (or
// why there is none).
struct Subject {
  fs::path wheel;
  std::string name;
  Expected<std::string> attestation = std::string();
};

// The attestation beside a local wheel, or --attestation.
Expected<std::string> local_attestation(const fs::path& wheel, const std::string& given) {
  fs::path file =
      given.empty() ? fs::path(cache::attestation_file_name(wheel.string())) : absolute_path(given);
  std::error_code ec;
  if (given.empty() && !fs::exists(file, ec))
    return Error::failed(cat("no attestation beside the wheel (", file.filename().string(), ")"));
  return read_file(file, cache::kMaxAttestationBytes);
}

// Every wheel the arguments name: URLs (their attestation at the same URL + ".intoto.jsonl"),
// files, and the *.whl under directories.
std::vector<Subject> subjects(Context& ctx, const VerifyArgs& args) {
  cache::Store store(ctx.cache_path());
  std::vector<Subject> out;
  for (const auto& given : args.wheels) {
    if (fetch::is_http_url(given)) {
      bool offline = ctx.offline(args.offline);
      Subject s;
      s.wheel = wheel_file(given, store, offline, ctx.index_url(args.index_url));
      s.name = fetch::url_filename(fetch::strip_fragment(given));
      std::string url = cache::attestation_file_name(fetch::strip_fragment(given));
      if (!args.attestation.empty())
        s.attestation = local_attestation(s.wheel, args.attestation);
      else if (offline)
        s.attestation = Error::failed("offline: the attestation at the wheel's URL is not read");
      else if (auto text = fetch_small_file(url, cache::kMaxAttestationBytes))
        s.attestation = std::move(*text);
      else
        s.attestation = Error::failed(cat("the server has no ", terminal_field(url, 300)));
      out.push_back(std::move(s));
      continue;
    }
    std::vector<fs::path> found = validate::find_wheels(absolute_path(given)).value();
    for (const auto& wheel : found)
      out.push_back({wheel, wheel.filename().string(), local_attestation(wheel, args.attestation)});
  }
  if (!args.attestation.empty() && out.size() != 1)
    raise(Error::bad_input(cat("--attestation is for one wheel; the arguments name ", out.size())));
  return out;
}

validate::Report report(const Subject& s, const attest::PublicKey& key) {
  validate::Report r;
  r.wheel = s.wheel;
  if (!s.attestation) {
    r.checks.push_back(
        {"attestation", validate::Verdict::Fail, s.attestation.error().message, {}, {}});
    return r;
  }
  attest::Verification v = attest::verify_wheel(s.wheel, s.name, *s.attestation, key);
  for (const auto& c : v.checks) {
    validate::Verdict verdict = c.verdict == attest::Check::Verdict::Pass ? validate::Verdict::Pass
                                : c.verdict == attest::Check::Verdict::Fail
                                    ? validate::Verdict::Fail
                                    : validate::Verdict::Skip;
    r.checks.push_back({c.id, verdict, c.message, {}, nlohmann::json::object()});
  }
  if (!v.sha256.empty()) r.checks.front().data = {{"sha256", v.sha256}, {"key_id", key.id()}};
  return r;
}

int run_verify(Context& ctx, const VerifyArgs& args) {
  attest::PublicKey key = attest::PublicKey::load(absolute_path(args.key)).value();
  std::vector<validate::Report> reports;
  for (const auto& s : subjects(ctx, args)) {
    reports.push_back(report(s, key));
    if (!ctx.json)
      std::cout << validate::render_text(reports.back(), ctx.verbosity > 0) << std::flush;
  }
  return finish_reports(ctx, reports, args.junit, "verification");
}

}  // namespace

std::function<int()> configure_verify(CLI::App& sub, Context& ctx) {
  auto opts = std::make_shared<VerifyArgs>();
  sub.footer(
      "A wheel passes when one envelope of its attestation (<wheel>.intoto.jsonl beside the file, "
      "or at the wheel's URL + .intoto.jsonl) is signed by --key, its in-toto Statement names the "
      "wheel's file name and sha256, and its SLSA provenance is the one the wheel's kiln.json "
      "gives. Exit 0 when every wheel passes, 1 when one fails, 2 for bad input.");
  sub.add_option("wheels", opts->wheels, "Wheels, http(s) URLs of wheels, or directories of *.whl")
      ->required();
  sub.add_option("--key", opts->key, "The signer's public key (PEM, `kiln key generate`'s .pub)")
      ->required()
      ->type_name("PUB");
  sub.add_option("--attestation", opts->attestation,
                 "The attestation file (default: beside the wheel, or at its URL)")
      ->type_name("FILE");
  sub.add_option("--junit", opts->junit, "Also write a JUnit XML report to FILE");
  sub.add_flag("--offline", opts->offline, "Never use the network");
  sub.add_option("--index-url", opts->index_url, "Package index (default: pip's)");
  return [&ctx, opts] { return run_verify(ctx, *opts); };
}

}  // namespace kiln::cli
