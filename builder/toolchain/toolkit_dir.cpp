#include "toolchain/toolkit_dir.h"

#include "core/fs.h"
#include "core/lock.h"
#include "core/log.h"
#include "core/strings.h"

namespace kiln::toolchain {

namespace fs = std::filesystem;

bool present(const fs::path& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec));
}

Expected<void> link_once(const fs::path& target, const fs::path& at, bool directory) {
  if (present(at)) return {};
  std::error_code ec;
  if (directory)
    fs::create_directory_symlink(target, at, ec);
  else
    fs::create_symlink(target, at, ec);
  if (ec) return Error::failed(cat("cannot link ", at.string(), ": ", ec.message()));
  return {};
}

namespace {

Expected<void> make_toolkit(const fs::path& dest, const ToolkitMaker& maker) {
  const fs::path toolkits = dest.parent_path();
  KILN_TRY(TempDir staging, TempDir::create(toolkits, cat(".", dest.filename().string(), ".tmp-")));
  fs::path root = staging.path() / "root";
  fs::path scratch = staging.path() / "scratch";
  KILN_CHECK(ensure_directory(root));
  KILN_CHECK(ensure_directory(scratch));
  KILN_TRY(nlohmann::json marker, maker.make(root, scratch));
  KILN_CHECK(write_file_atomic(root / kToolkitMarker, marker.dump(2) + "\n"));
  std::error_code ec;
  fs::rename(root, dest, ec);
  if (ec)
    return Error::failed(
        cat("cannot move the CUDA toolkit into ", dest.string(), ": ", ec.message()));
  return {};
}

}  // namespace

Expected<CudaToolkit> ensure_toolkit(const fs::path& dest, const ToolkitMaker& maker) {
  // Complete toolkits appear by rename: a directory there is whole.
  if (present(dest / kToolkitMarker)) return maker.open(dest);
  KILN_CHECK(ensure_directory(dest.parent_path()));
  KILN_TRY(FileLock lock,
           FileLock::acquire(dest.parent_path() / (dest.filename().string() + ".lock")));
  if (present(dest / kToolkitMarker)) return maker.open(dest);  // another kiln made it meanwhile
  remove_stale_staging(dest);  // what a process that died while holding this lock left
  log::info(cat("laying out ", maker.what, " in ", dest.string()));
  KILN_CHECK(make_toolkit(dest, maker));
  return maker.open(dest);
}

}  // namespace kiln::toolchain
