// kiln target init: write a target file.
//   --python PATH: for a live Python environment (its interpreter, the torch installed there, the
//                  CUDA version that torch was built with);
//   --torch VERSION [--index-url URL] [--python-tags cp311,…] [--archs SPEC|torch]
//                  [--toolkit system|wheels|debian]: fully pinned from a package index alone
//                  (init/from_index.h), without installing torch and without a GPU.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/context.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/strings.h"
#include "init/from_index.h"
#include "init/toml_text.h"
#include "manifest/target.h"
#include "pipeline/sources.h"
#include "toolchain/python.h"
#include "toolchain/torch.h"

namespace kiln::cli {

namespace {

struct TargetOptions {
  std::string python, torch, index_url, toolkit, archs = "9.0", name, output;
  std::vector<std::string> python_tags;
};

// The file to write: -o, else <manifests>/targets/<name>.toml; never over an existing one.
fs::path write_target(Context& ctx, const TargetOptions& opts, const std::string& name,
                      const std::string& text) {
  fs::path out = opts.output.empty() ? fs::path(ctx.manifests_dir) / "targets" / (name + ".toml")
                                     : fs::path(opts.output);
  std::error_code ec;
  if (fs::exists(out, ec)) raise(Error::bad_input(cat(out.string(), " already exists")));
  write_file_atomic(out, text).value();
  return out;
}

std::string name_or_default(const TargetOptions& opts, const std::string& fallback) {
  std::string name = opts.name;
  if (name.empty() && !opts.output.empty()) name = fs::path(opts.output).stem().string();
  if (name.empty()) name = fallback;
  if (!manifest::is_valid_target_name(name))
    raise(Error::bad_input(cat("bad target name '", name, "'")));
  return name;
}

int init_from_environment(Context& ctx, const TargetOptions& opts) {
  auto archs = manifest::ArchList::parse(opts.archs);
  if (!archs) raise(Error::bad_input(cat("--archs: ", archs.error().message)));
  toolchain::PythonInfo py = toolchain::probe_python(opts.python).value();
  toolchain::TorchSysroot torch = toolchain::torch_from_environment(py.executable).value();
  if (torch.cuda.empty())
    raise(Error::failed(cat("torch ", torch.version, " at ", torch.root.string(),
                            " is a CPU build: kiln builds CUDA extensions")));
  std::string base_version = torch.version.substr(0, torch.version.find('+'));
  std::string name = name_or_default(opts, cat("env-torch", base_version, "-", archs->slug()));
  // Every string through the encoders, as a target written from an index (init/toml_text.h).
  std::string text =
      cat(init::toml_comment(cat("Written by `kiln target init` from ", py.executable)),
          init::toml_comment(cat("(Python ", py.version, ", torch ", torch.version,
                                 " built with CUDA ", torch.cuda, ").")),
          "[target]\ndescription = ",
          init::toml_string(
              cat("torch ", torch.version, " from ", py.executable, " / ", archs->canonical())),
          "\narchs = ", init::toml_string(archs->torch_arch_list()),
          "\n\n[python]\ninterpreter = ", init::toml_string(py.executable),
          "\n\n[torch]\nsource = \"environment\"\nversion = ", init::toml_string(base_version),
          "\n\n[cuda]\ntoolkit = \"system\"\nversion = ", init::toml_string(torch.cuda), "\n");
  // The file must parse as a target: check before writing.
  manifest::parse_target(text, name, name + ".toml").value();
  fs::path out = write_target(ctx, opts, name, text);
  if (ctx.json)
    std::cout << nlohmann::json{{"name", name},
                                {"path", out.string()},
                                {"torch", torch.version},
                                {"cuda", torch.cuda}}
                     .dump(2)
              << "\n";
  else
    std::cout << out.string() << "\n";
  log::info(cat("target ", name, ": torch ", torch.version, " (CUDA ", torch.cuda, "), Python ",
                py.version, ", ", archs->canonical()));
  return 0;
}

int init_from_index(Context& ctx, const TargetOptions& opts) {
  if (!opts.index_url.empty() && !manifest::is_index_url(opts.index_url))
    raise(Error::bad_input(cat("bad --index-url '", printable_excerpt(opts.index_url, 200),
                               "': expected http:// or https://")));
  for (const std::string& tag : opts.python_tags)
    if (!manifest::is_cpython_tag(tag))
      raise(Error::bad_input(cat("bad --python-tags entry '", printable_excerpt(tag, 40),
                                 "': expected e.g. cp312 or cp313t")));
  const cache::Store store(ctx.cache_path());
  auto fetching = pipeline::Fetching::create(store, false, "").value();
  init::IndexRequest r;
  r.torch_version = opts.torch;
  r.cuda_index = fetching->context().index_url;
  r.torch_index = opts.index_url.empty() ? r.cuda_index : opts.index_url;
  r.write_index = !opts.index_url.empty();
  r.python_tags = opts.python_tags;
  r.archs = opts.archs;
  r.toolkit = opts.toolkit;
  r.name =
      opts.name.empty() && !opts.output.empty() ? fs::path(opts.output).stem().string() : opts.name;
  if (auto py = toolchain::probe_python("python3")) r.prefer_tag = py->abi_tag;
  init::IndexTarget t = init::target_from_index(r, fetching->context().downloader).value();
  name_or_default(opts, t.name);
  fs::path out = write_target(ctx, opts, t.name, t.text);
  t.facts["path"] = out.string();
  if (ctx.json)
    std::cout << t.facts.dump(2) << "\n";
  else
    std::cout << out.string() << "\n";
  log::info(cat("target ", t.name, ": torch ", opts.torch, " (CUDA ",
                t.facts["cuda"].get<std::string>(), "), ",
                t.facts["toolkit_note"].get<std::string>(), ", ",
                t.facts["archs"].get<std::string>()));
  return 0;
}

}  // namespace

std::function<int()> configure_target(CLI::App& sub, Context& ctx) {
  auto opts = std::make_shared<TargetOptions>();
  sub.require_subcommand(1);
  CLI::App* init = sub.add_subcommand(
      "init", "Write a target file: from a live Python environment, or from a package index");
  CLI::Option* python =
      init->add_option("--python", opts->python, "A live environment's interpreter (with torch)");
  CLI::Option* torch = init->add_option("--torch", opts->torch,
                                        "A torch version on the index (2.15.0, 2.11.0+cu128)");
  python->excludes(torch);
  init->add_option("--index-url", opts->index_url,
                   "The index torch comes from (default: pip's configuration); with --torch")
      ->needs(torch);
  init->add_option("--python-tags", opts->python_tags, "CPython ABIs to pin (default: all)")
      ->delimiter(',')
      ->needs(torch);
  init->add_option("--toolkit", opts->toolkit,
                   "system | wheels | debian (default: wheels for CUDA 13, debian for CUDA 12)")
      ->needs(torch);
  CLI::Option* archs_option =
      init->add_option("--archs", opts->archs,
                       "Arch spec (default: 9.0); with --torch, 'torch': torch's own")
          ->type_name(kArchsValue);
  init->add_option("--name", opts->name,
                   "Target name (default: the file name, or one made of torch's version)");
  init->add_option("-o,--output", opts->output,
                   "File to write (default: <manifests>/targets/<name>.toml)");
  return [&ctx, opts, archs_option, python, torch] {
    require_archs_value(archs_option, opts->archs);
    if (python->count()) return init_from_environment(ctx, *opts);
    if (torch->count()) return init_from_index(ctx, *opts);
    raise(Error::bad_input("target init needs --python PATH or --torch VERSION"));
  };
}

}  // namespace kiln::cli
