// kiln: run the CLI, catch once, print "kiln: error: …".
#include <exception>
#include <string_view>

#include "cli/context.h"
#include "core/error.h"
#include "core/interrupt.h"
#include "core/log.h"
#include "core/sandbox.h"

int main(int argc, char** argv) {
  // The sandbox helper (core/sandbox.h): kiln re-executed to run one command of a build, before
  // anything else of kiln's (threads, handlers, its own namespace) exists.
  if (argc > 1 && std::string_view(argv[1]) == "__sandbox") return kiln::sandbox_main(argc, argv);
  kiln::install_interrupt_handlers();
  try {
    return kiln::cli::run(argc, argv);
  } catch (const kiln::KilnError& e) {
    kiln::log::error(e.error().message);
    if (!e.error().detail.empty()) kiln::log::raw(e.error().detail);
    return kiln::exit_code(e.error().kind);
  } catch (const std::exception& e) {
    kiln::log::error(std::string("internal error: ") + e.what());
    return 1;
  }
}
