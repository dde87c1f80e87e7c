// kiln target init --python PATH [--archs SPEC] [--name NAME] [-o FILE]: a target file for a live
// Python environment (its interpreter, the torch installed there, the CUDA version that torch was
// built with).
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/context.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/strings.h"
#include "manifest/target.h"
#include "toolchain/python.h"
#include "toolchain/torch.h"

namespace kiln::cli {

std::function<int()> configure_target(CLI::App& sub, Context& ctx) {
  struct Options {
    std::string python, archs = "9.0", name, output;
  };
  auto opts = std::make_shared<Options>();
  sub.require_subcommand(1);
  CLI::App* init =
      sub.add_subcommand("init", "Write a target file for a live Python environment with torch");
  init->add_option("--python", opts->python, "The environment's interpreter")->required();
  CLI::Option* archs_option = init->add_option("--archs", opts->archs, "Arch spec (default: 9.0)");
  init->add_option("--name", opts->name,
                   "Target name (default: the file name, or env-<torch>-<archs>)");
  init->add_option("-o,--output", opts->output,
                   "File to write (default: <manifests>/targets/<name>.toml)");
  return [&ctx, opts, archs_option] {
    require_archs_value(archs_option, opts->archs);
    auto archs = manifest::ArchList::parse(opts->archs);
    if (!archs) raise(Error::bad_input(cat("--archs: ", archs.error().message)));
    toolchain::PythonInfo py = toolchain::probe_python(opts->python).value();
    toolchain::TorchSysroot torch = toolchain::torch_from_environment(py.executable).value();
    if (torch.cuda.empty())
      raise(Error::failed(cat("torch ", torch.version, " at ", torch.root.string(),
                              " is a CPU build: kiln builds CUDA extensions")));
    std::string base_version = torch.version.substr(0, torch.version.find('+'));
    std::string name = opts->name;
    if (name.empty() && !opts->output.empty()) name = fs::path(opts->output).stem().string();
    if (name.empty()) name = cat("env-torch", base_version, "-", archs->slug());
    if (!manifest::is_valid_target_name(name))
      raise(Error::bad_input(cat("bad target name '", name, "'")));
    std::string text =
        cat("# Written by `kiln target init` from ", py.executable, "\n", "# (Python ", py.version,
            ", torch ", torch.version, " built with CUDA ", torch.cuda, ").\n", "[target]\n",
            "description = \"torch ", torch.version, " from ", py.executable, " / ",
            archs->canonical(), "\"\n", "archs = \"", archs->torch_arch_list(), "\"\n\n",
            "[python]\n", "interpreter = \"", py.executable, "\"\n\n", "[torch]\n",
            "source = \"environment\"\n", "version = \"", base_version, "\"\n\n", "[cuda]\n",
            "toolkit = \"system\"\n", "version = \"", torch.cuda, "\"\n");
    // The file must parse as a target: check before writing.
    manifest::parse_target(text, name, name + ".toml").value();
    fs::path out = opts->output.empty() ? fs::path(ctx.manifests_dir) / "targets" / (name + ".toml")
                                        : fs::path(opts->output);
    std::error_code ec;
    if (fs::exists(out, ec)) raise(Error::bad_input(cat(out.string(), " already exists")));
    write_file_atomic(out, text).value();
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
  };
}

}  // namespace kiln::cli
