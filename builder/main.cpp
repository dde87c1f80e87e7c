// kiln: run the CLI, catch once, print "kiln: error: …".
#include <exception>

#include "cli/context.h"
#include "core/error.h"
#include "core/interrupt.h"
#include "core/log.h"

int main(int argc, char** argv) {
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
