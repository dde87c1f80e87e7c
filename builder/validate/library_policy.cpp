// The "elf" check's list of the libraries a wheel may take from the system without bundling them:
// auditwheel's policy for the wheel's platform tag (src/auditwheel/policy/manylinux-policy.json and
// musllinux-policy.json, "lib_whitelist", auditwheel 6.x), plus the program interpreter, which
// auditwheel allows implicitly.
#include <algorithm>
#include <climits>
#include <iterator>
#include <optional>
#include <set>
#include <string>

#include "validate/checks.h"

namespace kiln::validate {

namespace {

using Libraries = std::set<std::string>;

// manylinux_2_5 (manylinux1); manylinux_2_12 adds libexpat.so.1, manylinux_2_24 libmvec.so.1.
Libraries glibc_policy(int minor) {
  Libraries libs = {"libatomic.so.1",      "libgcc_s.so.1",   "libstdc++.so.6",      "libm.so.6",
                    "libanl.so.1",         "libdl.so.2",      "librt.so.1",          "libc.so.6",
                    "libnsl.so.1",         "libutil.so.1",    "libpthread.so.0",     "libX11.so.6",
                    "libXext.so.6",        "libXrender.so.1", "libICE.so.6",         "libSM.so.6",
                    "libGL.so.1",          "libresolv.so.2",  "libgobject-2.0.so.0", "libz.so.1",
                    "libgthread-2.0.so.0", "libglib-2.0.so.0"};
  if (minor >= 12) libs.insert("libexpat.so.1");
  if (minor >= 24) libs.insert("libmvec.so.1");
  return libs;
}

Libraries policy_for_tag(const std::string& tag) {
  std::string arch;
  if (int minor = manylinux_minor(tag, arch); minor >= 0) return glibc_policy(minor);
  if (tag.starts_with("musllinux_")) return {"libc.so", "libz.so.1"};
  // linux_<arch>, any, or another platform: no promise to check the libraries against; the
  // newest manylinux policy, what such a wheel can at best expect of a system.
  return glibc_policy(INT_MAX);
}

}  // namespace

std::set<std::string> allowed_system_libraries(const packaging::WheelFileName& name) {
  std::optional<Libraries> allowed;  // what every platform tag's policy allows
  for (const auto& tag : name.platform_tags) {
    Libraries libs = policy_for_tag(tag);
    if (!allowed) {
      allowed = std::move(libs);
      continue;
    }
    Libraries both;
    std::set_intersection(allowed->begin(), allowed->end(), libs.begin(), libs.end(),
                          std::inserter(both, both.end()));
    allowed = std::move(both);
  }
  Libraries out = allowed.value_or(glibc_policy(INT_MAX));
  out.insert({"ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "ld-musl-x86_64.so.1",
              "ld-musl-aarch64.so.1"});
  return out;
}

}  // namespace kiln::validate
