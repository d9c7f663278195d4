#pragma once

// What every fuzz target shares: the input as text, and a check that fails the run (abort, so
// libFuzzer and the corpus replay both report the input) when a property does not hold.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace ktesio::fuzz {

inline void Check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

inline std::string_view AsText(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace ktesio::fuzz
