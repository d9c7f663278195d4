#pragma once

// The per-instance log: numbered segments `output-NNNNNNNN.log` in `<home>/logs/`, written by
// the agent's ktesio-shim (agent-out, agent-err) and by the engine (engine lines), rotated by
// the shim. Each record is one line: `<RFC 3339 UTC ms> <stream> <text>`.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ktesio::daemon::logs {

struct Segment {
  uint64_t sequence = 0;
  std::string path;
};

// Segments in `log_dir`, oldest first. A missing directory has none.
std::vector<Segment> ListSegments(const std::string& log_dir);

// "output-00000042.log" for 42.
std::string SegmentName(uint64_t sequence);

// 2026-11-30T15:14:26.123Z
std::string FormatLogTime(int64_t unix_ms);
std::optional<int64_t> ParseLogTime(std::string_view text);

struct LogRecord {
  int64_t at_ms = 0;
  std::string stream;  // agent-out | agent-err | engine
  std::string text;
};

// Parses one record; nullopt for a line that is not one (never throws).
std::optional<LogRecord> ParseRecord(std::string_view line);

// Appends an engine record to the newest segment (creating the first one). Errors:
// INTERNAL/IO_ERROR.
absl::Status AppendEngineLine(const std::string& log_dir, int64_t unix_ms, std::string_view text);

}  // namespace ktesio::daemon::logs
