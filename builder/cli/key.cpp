// kiln key generate [FILE] | kiln key public [FILE]
// The Ed25519 key kiln signs attestations with (attest/key.h, docs/verify.md "Signing").
#include <CLI/CLI.hpp>

#include <iostream>

#include <nlohmann/json.hpp>

#include "attest/key.h"
#include "cli/context.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/strings.h"

namespace kiln::cli {

namespace fs = std::filesystem;

namespace {

struct KeyOptions {
  std::string file;
  std::string action;
};

// FILE, else the key builds sign with ($KILN_SIGNING_KEY, the configuration's signing-key).
fs::path key_file(const Context& ctx, const KeyOptions& opts) {
  std::string file = opts.file.empty() ? ctx.defaults.signing_key : opts.file;
  if (file.empty())
    raise(Error::bad_input(
        "name the private key's file (or set $KILN_SIGNING_KEY or the configuration's "
        "signing-key)"));
  return absolute_path(file);
}

int generate(const Context& ctx, const KeyOptions& opts) {
  fs::path file = key_file(ctx, opts);
  attest::SigningKey key = attest::SigningKey::generate().value();
  key.write(file).value();
  fs::path pub = file.string() + ".pub";
  const std::string& id = key.public_key().id();
  if (ctx.json) {
    std::cout << nlohmann::json{{"private_key", file.string()},
                                {"public_key", pub.string()},
                                {"key_id", id}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << pub.string() << "\n";
  log::info(cat("wrote the private key ", file.string(), " (mode 0600) and its public key ",
                pub.string(), " (key id ", id, ")"));
  log::info(cat("sign what this host builds with it: KILN_SIGNING_KEY=", file.string(),
                " kiln build …, or signing-key = \"", file.string(),
                "\" in the configuration; give ", pub.filename().string(),
                " to those who run kiln verify --key"));
  return 0;
}

int show_public(const Context& ctx, const KeyOptions& opts) {
  attest::SigningKey key = attest::SigningKey::load(key_file(ctx, opts)).value();
  const attest::PublicKey& pub = key.public_key();
  if (ctx.json) {
    std::cout << nlohmann::json{{"key_id", pub.id()}, {"public_key", pub.pem()}}.dump(2) << "\n";
    return 0;
  }
  std::cout << pub.pem();
  log::info(cat("key id ", pub.id()));
  return 0;
}

}  // namespace

std::function<int()> configure_key(CLI::App& sub, Context& ctx) {
  auto opts = std::make_shared<KeyOptions>();
  sub.require_subcommand(1);
  CLI::App* gen = sub.add_subcommand(
      "generate",
      "Write a new Ed25519 private key to FILE (mode 0600) and its public key to "
      "FILE.pub; an existing file is never replaced");
  CLI::App* pub =
      sub.add_subcommand("public", "Print the public key (PEM) of the private key in FILE");
  for (CLI::App* s : {gen, pub}) {
    s->add_option("file", opts->file,
                  "The private key's file (default: $KILN_SIGNING_KEY, the configuration's "
                  "signing-key)")
        ->type_name("FILE");
    s->callback([opts, s] { opts->action = s->get_name(); });
  }
  return [&ctx, opts] {
    return opts->action == "generate" ? generate(ctx, *opts) : show_public(ctx, *opts);
  };
}

}  // namespace kiln::cli
