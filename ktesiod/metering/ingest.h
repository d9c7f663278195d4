#pragma once

// Self-reported usage ingestion: reads a run's usage file (the `KTESIO_USAGE` lines the shim
// copied out of the agent's stdout) from the durable cursor, and commits — in ONE transaction —
// the new ledger rows (deduplicated by UNIQUE(instance, run, sequence)), their usage_update
// events and the advanced cursor. A crash at any point therefore neither loses nor double-counts
// an event: what was committed is past the cursor, what was not is read again.
//
// Thread-safety: engine thread only.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "budget/budget.h"
#include "store/store.h"

namespace ktesio::daemon::metering {

struct IngestResult {
  uint64_t accepted = 0;                 // new ledger rows
  std::vector<budget::Breach> breaches;  // crossed by this batch, recorded in its transaction
  uint64_t duplicates = 0;               // replayed sequences, recognized and not counted
  std::vector<std::string> malformed;    // diagnostics, one per malformed line
};

// The usage file of `run` in an instance's run dir.
std::string UsageFilePath(const std::string& run_dir, int64_t run);

// Ingests every complete line past the run's cursor. Errors: STORE_ERROR (nothing committed).
// Each event is priced at `limits.rate` (when set) and checked against `limits` inside the same
// transaction; breaches are recorded (breaches row + budget_breach event) there too.
absl::StatusOr<IngestResult> IngestUsageFile(store::Store& store, const store::InstanceRow& row,
                                             int64_t run, const std::string& path,
                                             const std::string& metering_source,
                                             const budget::Limits& limits, int64_t now_ms);

}  // namespace ktesio::daemon::metering
