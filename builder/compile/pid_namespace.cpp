#include "compile/pid_namespace.h"

#include "core/log.h"
#include "core/process.h"

namespace kiln::compile {

const PidNamespace& nvcc_pid_namespace() {
  static const PidNamespace ns = [] {
    PidNamespace n;
    n.prefix = unshare_prefix({"--pid", "--fork", "--kill-child"});
    if (n.prefix.empty()) {
      n.caveat =
          "nvcc ran outside a PID namespace (unshare --pid is not permitted here): objects whose "
          "code has anonymous namespaces differ between builds";
      log::warn(n.caveat);
    }
    return n;
  }();
  return ns;
}

}  // namespace kiln::compile
