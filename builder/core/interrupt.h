// SIGINT/SIGTERM: a flag the long-running loops poll, so kiln stops its children and commits
// nothing (exit 130).
#pragma once

namespace kiln {

void install_interrupt_handlers();
bool interrupted();
// Raises KilnError(Interrupted) when an interrupt arrived.
void check_interrupted();

}  // namespace kiln
