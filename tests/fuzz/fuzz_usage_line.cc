// Fuzzes ParseUsageLine with arbitrary bytes: it must be total, classify consistently and
// re-parse its own canonical rendering of an accepted report to the same values.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "ktesio/contract/usage_line.h"

using ktesio::fuzz::AsText;
using ktesio::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ktesio::contract::ParseUsageLine;
  using ktesio::contract::UsageLineKind;
  using ktesio::contract::UsageLineResult;
  const std::string_view line = AsText(data, size);
  const UsageLineResult result = ParseUsageLine(line);
  switch (result.kind) {
    case UsageLineKind::kNotUsage:
      Check(result.error.empty());
      Check(line.find("KTESIO_USAGE") == std::string_view::npos ||
            line.find_first_not_of(" \t") != line.find("KTESIO_USAGE"));
      break;
    case UsageLineKind::kMalformed:
      Check(!result.error.empty());
      break;
    case UsageLineKind::kUsage: {
      Check(result.error.empty());
      const std::string canonical =
          "KTESIO_USAGE {\"sequence\":" + std::to_string(result.report.sequence) +
          ",\"input_tokens\":" + std::to_string(result.report.input_tokens) +
          ",\"output_tokens\":" + std::to_string(result.report.output_tokens) + "}";
      const UsageLineResult again = ParseUsageLine(canonical);
      Check(again.kind == UsageLineKind::kUsage && again.report == result.report);
      break;
    }
  }
  return 0;
}
