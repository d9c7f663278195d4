#pragma once

// Exact decimal dollar amounts for cost.rate.* (dollars per 1M tokens) and budget.dollars.*
// (caps), parsed into integer micro-dollars. Pure; thread-safe.
//
// Accepted spelling (strict, no locale): one or more ASCII digits, optionally followed by '.' and
// one to six digits. Rejected: a sign, a leading '$', an exponent ("1e3"), spaces, digit
// separators, a bare or trailing '.', more than six fraction digits (no silent rounding), and
// amounts above INT64_MAX micro-dollars.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ktesio::daemon::config {

inline constexpr std::int64_t kMicrosPerDollar = 1000000;

// "2.50" -> 2500000, "0.000001" -> 1, "0" -> 0.
// Errors: INVALID_ARGUMENT/CONFIG_INVALID naming the rule broken.
absl::StatusOr<std::int64_t> ParseMicroDollars(std::string_view text);

// The canonical decimal spelling of `micros` dollars: no leading zeros, no trailing fraction
// zeros, no '.' for whole amounts ("2.5", "0.000001", "7", "0").
std::string FormatMicroDollars(std::int64_t micros);

}  // namespace ktesio::daemon::config
