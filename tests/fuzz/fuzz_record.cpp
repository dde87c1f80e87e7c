// Wheels as `kiln validate` reads them: the zip, RECORD (CSV), METADATA, WHEEL, kiln.json and the
// ELF files with their fat binaries. Input: the wheel's file name, a newline, the wheel's bytes.
#include "fuzz.h"
#include "validate/checks.h"

using kiln::fuzz::fail;

KILN_FUZZ_TARGET(record) {
  std::string_view in = kiln::fuzz::text(data, size);
  auto nl = in.find('\n');
  if (nl == std::string_view::npos || nl > 255) return 0;
  auto wheel = kiln::validate::load_wheel_image(std::string(in.substr(nl + 1)),
                                                std::string(in.substr(0, nl)));
  if (!wheel) {
    if (wheel.error().message.empty()) fail("an error without a message");
    return 0;
  }
  kiln::validate::Options options;
  std::vector<kiln::validate::CheckResult> results = {
      kiln::validate::check_archive(*wheel), kiln::validate::check_metadata(*wheel, {}),
      kiln::validate::check_tags(*wheel), kiln::validate::check_elf(*wheel)};
  for (auto& r : kiln::validate::check_gpu_code(*wheel, options)) results.push_back(std::move(r));
  for (const auto& r : results) {
    if (r.id.empty() || r.message.empty()) fail("a check result without an id or a message");
    (void)r.data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return 0;
}
