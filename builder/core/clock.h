// The one clock of reproducible output: SOURCE_DATE_EPOCH, clamped to the zip epoch.
#pragma once

#include <cstdint>

namespace kiln {

constexpr std::int64_t kZipEpoch = 315532800;  // 1980-01-01T00:00:00Z, the earliest zip time

// $SOURCE_DATE_EPOCH when set and valid, else kZipEpoch; never earlier than kZipEpoch.
std::int64_t source_date_epoch();

}  // namespace kiln
