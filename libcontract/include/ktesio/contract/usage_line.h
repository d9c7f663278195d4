#pragma once

// The self-reported metering channel: KTESIO_USAGE sentinel lines on an agent's stdout.
//
//   KTESIO_USAGE {"sequence":0,"input_tokens":128,"output_tokens":512}

#include <cstdint>
#include <string>
#include <string_view>

namespace ktesio::contract {

// The exact prefix that makes a stdout line a usage report.
inline constexpr std::string_view kUsagePrefix = "KTESIO_USAGE";

// What ktesio-shim writes to the usage file in place of a stdout line that starts with the
// prefix but is too long for one 16 KiB log record (it is recorded in pieces, none of them a
// line). ParseUsageLine reports it as malformed with its own reason.
inline constexpr std::string_view kOverlongUsageLine = "KTESIO_USAGE\x01over-long";

// The three agent-supplied fields of one usage event; the engine stamps run, instance, source
// and time.
struct UsageReport {
  std::uint64_t sequence = 0;  // per-Run ordinal, the replay-dedup key
  std::uint64_t input_tokens = 0;
  std::uint64_t output_tokens = 0;
  bool operator==(const UsageReport&) const = default;
};

enum class UsageLineKind {
  kNotUsage,   // ordinary output: the line does not start with the prefix
  kUsage,      // a well-formed report
  kMalformed,  // the prefix, then a payload that breaks the rules: a diagnostic, never counted
};

struct UsageLineResult {
  UsageLineKind kind = UsageLineKind::kNotUsage;
  UsageReport report;  // meaningful only for kUsage
  std::string error;   // kMalformed only: what is wrong (bounded, printable)
};

// Classifies one captured stdout line (with or without its trailing "\n").
//
// Leading spaces/tabs and trailing spaces/tabs/"\r"/"\n" are ignored. A line whose remaining
// text does not start with "KTESIO_USAGE" is kNotUsage. Otherwise it is kUsage only when the
// prefix is followed by at least one space or tab and then exactly one JSON object (RFC 8259,
// with JSON whitespace) holding exactly the fields "sequence", "input_tokens" and
// "output_tokens", each once, each a non-negative JSON integer (no sign, fraction, exponent or
// leading zero) that fits in 64 bits; nothing may follow the object. Every other line with the
// prefix is kMalformed with a specific error. Total over arbitrary bytes; never fails.
UsageLineResult ParseUsageLine(std::string_view line);

}  // namespace ktesio::contract
