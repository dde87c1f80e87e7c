// nvcc's PID namespace. cudafe++ names anonymous namespaces (CCCL's, for one) after its process
// id, and the names end up in host and device symbols: both compiling backends run nvcc in a PID
// namespace of its own (`unshare --pid`), where the ids are the same on every run.
#pragma once

#include <string>
#include <vector>

namespace kiln::compile {

struct PidNamespace {
  // What nvcc's command is run after: {"unshare", "--pid", "--fork", "--kill-child", "--"}, or
  // empty where this process may not make a PID namespace.
  std::vector<std::string> prefix;
  // Empty with a prefix; else what a build's caveats say (BuildOutput::caveats).
  std::string caveat;
};

// Probed once per process; without a namespace kiln warns once, and builds still work, but objects
// of translation units with anonymous namespaces differ between builds.
const PidNamespace& nvcc_pid_namespace();

}  // namespace kiln::compile
