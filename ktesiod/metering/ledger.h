#pragma once

// The usage ledger's write side, shared by both metering sources: inside the caller's store
// transaction it records events (deduplicated by UNIQUE(instance, run, sequence)), their
// usage_update events, each event's cost at the Rate in force, and — in the same transaction —
// every budget dimension the event crosses (breaches row + budget_breach event). Unknown-usage
// calls (engine-observed calls whose provider reported no usage) go to their own log and are
// never folded into zero tokens.
//
// Thread-safety: engine thread only; construct and use within one Store::InTransaction.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "budget/budget.h"
#include "store/store.h"

namespace ktesio::daemon::metering {

class LedgerWriter {
 public:
  // Prepares the statements and reads the run's totals and already-fired budget dimensions.
  // Errors: STORE_ERROR.
  static absl::StatusOr<LedgerWriter> Begin(store::Store& store, const store::InstanceRow& row,
                                            int64_t run, std::string source,
                                            const budget::Limits& limits, int64_t now_ms);

  // Records one event. Returns false (and changes nothing) when its sequence was already
  // recorded for this run. Errors: STORE_ERROR.
  absl::StatusOr<bool> Add(uint64_t sequence, uint64_t input_tokens, uint64_t output_tokens);
  // Records a metered call whose usage was absent. Errors: STORE_ERROR.
  absl::StatusOr<bool> AddUnknown(uint64_t sequence, std::string_view api);

  // Folds what was added into the per-run totals (usage_totals). Call once, last, inside the
  // same transaction. Errors: STORE_ERROR.
  absl::Status Finish();

  // The dimensions crossed by the events added so far, in firing order.
  const std::vector<budget::Breach>& breaches() const { return breaches_; }

 private:
  LedgerWriter() = default;
  absl::Status RecordBreaches();

  store::Store* store_ = nullptr;
  store::InstanceRow row_;
  int64_t run_ = 0;
  std::string source_;
  budget::Limits limits_;
  int64_t now_ms_ = 0;
  std::string at_;
  budget::Totals totals_;
  budget::Fired fired_;
  std::vector<budget::Breach> breaches_;
  struct Delta {
    uint64_t input = 0, output = 0, priced = 0, unpriced = 0, unknown = 0;
    int64_t micros = 0;
  } delta_;
  store::Statement insert_, event_, breach_, breach_event_, unknown_;
};

}  // namespace ktesio::daemon::metering
