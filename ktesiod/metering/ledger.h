#pragma once

// The usage ledger's write side, shared by both metering sources: inside the caller's store
// transaction it records events (deduplicated by the ledger's key (instance, run, sequence)),
// their usage_update events (those of one transaction share events rows of up to kMaxSpan,
// flushed when full, before a breach and by Finish), each event's cost at the Rate in force, and —
// in the same transaction — every budget dimension the event crosses (breaches row + budget_breach
// event). Unknown-usage calls (engine-observed calls whose provider reported no usage) go to their
// own log and are never folded into zero tokens.
//
// Thread-safety: engine thread only; construct and use within one Store::InTransaction.

#include <cstdint>
#include <optional>
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

  // Writes the rows and events still held back, and folds what was added into the per-run
  // totals (usage_totals). Required: call once, last, inside the
  // same transaction. Errors: STORE_ERROR.
  absl::Status Finish();

  // The dimensions crossed by the events added so far, in firing order.
  const std::vector<budget::Breach>& breaches() const { return breaches_; }

  // The most usage_update events one events row holds: one reader's batch (see
  // store::kEventReadBatch).
  static constexpr int64_t kMaxSpan = store::kEventReadBatch;

  // A usage_update document in four constant fragments around its three numbers:
  // head INPUT output OUTPUT source SEQUENCE tail (the strings escaped once, not per event).
  struct UsageFragments {
    std::string head, output, source, tail;
  };
  static UsageFragments UsageDocument(std::string_view instance, int64_t run,
                                      std::string_view source, std::string_view at);

 private:
  LedgerWriter() = default;
  absl::Status RecordBreaches();
  // Writes the usage_update events added since the last flush as one span (Store::AppendEventSpan).
  absl::Status FlushEvents();
  // One ledger row, not yet written when it is certainly new (above the run's highest sequence).
  struct Row {
    int64_t sequence = 0, input = 0, output = 0;
    std::optional<int64_t> cost;
  };
  static constexpr size_t kRowsPerInsert = 64;
  void BindRow(store::Statement& statement, int first, const Row& row) const;
  // Writes the certainly-new rows held back so far.
  absl::Status WriteRows();

  store::Store* store_ = nullptr;
  store::InstanceRow row_;
  int64_t run_ = 0;
  std::string source_;
  budget::Limits limits_;
  int64_t now_ms_ = 0;
  std::string at_;
  UsageFragments usage_doc_;
  budget::Totals totals_;
  budget::Fired fired_;
  std::vector<budget::Breach> breaches_;
  struct Delta {
    uint64_t input = 0, output = 0, priced = 0, unpriced = 0, unknown = 0;
    int64_t micros = 0;
  } delta_;
  // usage_update documents not yet written, joined by '\n', and how many.
  std::string pending_payloads_;
  int64_t pending_events_ = 0;
  // Certainly-new rows not yet written, and the highest sequence of the run so far (-1: none).
  std::vector<Row> unwritten_;
  int64_t highest_ = -1;
  store::Statement insert_, insert_many_, insert_new_, breach_, breach_event_, unknown_;
};

}  // namespace ktesio::daemon::metering
