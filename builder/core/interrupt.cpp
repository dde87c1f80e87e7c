#include "core/interrupt.h"

#include <csignal>

#include "core/error.h"

namespace kiln {

namespace {
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_signal(int) {
  g_interrupted = 1;
}
}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

bool interrupted() {
  return g_interrupted != 0;
}

void check_interrupted() {
  if (interrupted()) raise(Error::interrupted());
}

}  // namespace kiln
