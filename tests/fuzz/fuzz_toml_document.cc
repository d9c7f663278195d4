// Fuzzes MergeIntoTomlDocument: arbitrary bytes as the existing document, merged with fixed
// keys. Whatever it accepts must be valid TOML again (it re-merges cleanly) and hold the value.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "ktesio/contract/config_mapping.h"

using ktesio::fuzz::AsText;
using ktesio::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view existing = AsText(data, size);
  const std::vector<std::pair<std::string, std::string>> values = {{"llm.model", "m\"\\\n\x01"},
                                                                   {"ktesio_fuzz", "v"}};
  absl::StatusOr<std::string> merged = ktesio::contract::MergeIntoTomlDocument(existing, values);
  if (!merged.ok()) {
    return 0;
  }
  absl::StatusOr<std::string> again = ktesio::contract::MergeIntoTomlDocument(*merged, values);
  Check(again.ok());
  Check(*again == *merged);
  return 0;
}
