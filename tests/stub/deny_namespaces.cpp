// Runs a command where namespaces are denied, as Docker's default seccomp profile denies them:
// unshare(2) and clone(2) with any CLONE_NEW* flag fail with EPERM, clone3(2) with ENOSYS (its
// flags are in memory a filter cannot read; glibc then falls back to clone), setns(2) with EPERM.
// For the e2e tests of kiln's sandbox fallback (test_sandbox.py).
//   deny_namespaces COMMAND [ARG...]
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>

namespace {

constexpr unsigned kNewFlags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
                               CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP;

#define ARG0_LOW offsetof(struct seccomp_data, args[0])
#define NR offsetof(struct seccomp_data, nr)

sock_filter kFilter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NR),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setns, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 1, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 3),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG0_LOW),
    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, kNewFlags, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: deny_namespaces COMMAND [ARG...]\n");
    return 2;
  }
  sock_fprog program{static_cast<unsigned short>(sizeof kFilter / sizeof kFilter[0]), kFilter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    std::perror("deny_namespaces: seccomp");
    return 1;
  }
  execvp(argv[1], argv + 1);
  std::perror("deny_namespaces: exec");
  return 127;
}
