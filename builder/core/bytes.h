// Little-endian integers read from byte buffers (zip and fatbin headers). Callers check bounds.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln {

inline std::uint16_t read_le16(std::string_view b, std::uint64_t at) {
  return static_cast<std::uint16_t>(static_cast<unsigned char>(b[at]) |
                                    (static_cast<unsigned char>(b[at + 1]) << 8));
}
inline std::uint32_t read_le32(std::string_view b, std::uint64_t at) {
  return read_le16(b, at) | (static_cast<std::uint32_t>(read_le16(b, at + 2)) << 16);
}
inline std::uint64_t read_le64(std::string_view b, std::uint64_t at) {
  return read_le32(b, at) | (static_cast<std::uint64_t>(read_le32(b, at + 4)) << 32);
}

}  // namespace kiln
