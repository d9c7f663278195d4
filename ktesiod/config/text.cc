#include "config/text.h"

#include <cstdint>

namespace ktesio::daemon::config::internal {

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t length = 0;
    std::uint32_t code_point = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      length = 2;
      code_point = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3;
      code_point = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4;
      code_point = c & 0x07;
    } else {
      return false;
    }
    if (i + length > s.size()) {
      return false;
    }
    for (size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(s[i + k]);
      if ((next & 0xC0) != 0x80) {
        return false;
      }
      code_point = (code_point << 6) | (next & 0x3F);
    }
    constexpr std::uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code_point < kMinForLength[length] || code_point > 0x10FFFF ||
        (code_point >= 0xD800 && code_point <= 0xDFFF)) {
      return false;
    }
    i += length;
  }
  return true;
}

}  // namespace ktesio::daemon::config::internal
