#pragma once

// ktctl's output discipline: results on stdout, diagnostics on stderr; under --json stdout holds
// only the document. A closed stdout pipe ends the process with exit 0.

#include <string>
#include <string_view>

namespace ktesio::cli {

// Writes to stdout; exits 0 at once when stdout is a closed pipe.
void Out(std::string_view text);
// Writes one line to stderr (a newline is appended).
void Err(std::string_view line);

// Renders an error. Under --json: {"schema_version":1,"error":{"reason","message"}} on stdout;
// otherwise "ktctl: <message>" on stderr. Returns `exit_code` for convenience.
int ReportError(bool json, std::string_view reason, std::string_view message, int exit_code);

// RFC 3339 UTC with milliseconds, e.g. 2026-11-30T15:14:26.123Z.
std::string FormatTime(int64_t unix_ms);

}  // namespace ktesio::cli
