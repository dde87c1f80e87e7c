#include "core/clock.h"

#include <cstdlib>
#include <string>

namespace kiln {

std::int64_t source_date_epoch() {
  const char* value = std::getenv("SOURCE_DATE_EPOCH");
  if (value == nullptr || *value == '\0') return kZipEpoch;
  char* end = nullptr;
  long long parsed = std::strtoll(value, &end, 10);
  if (end == value || *end != '\0' || parsed < kZipEpoch) return kZipEpoch;
  return parsed;
}

}  // namespace kiln
