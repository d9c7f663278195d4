// Retention: the engine's pruner (docs/operations.md "Retention"). History older than the
// policy goes in small transactions on the owner thread, interleaved with everything else;
// per-run totals stay, so usage, budgets and dollars never change when detail is pruned. The
// usage copies of runs whose ledger detail went give their bytes back too (UsageMeter).

#include "absl/strings/str_cat.h"
#include "engine/engine.h"

namespace ktesio::daemon::engine {
namespace {

constexpr int64_t kBatch = 2000;  // rows per transaction

}  // namespace

void Engine::ScheduleRetention(std::chrono::seconds delay) {
  retention_timer_.expires_after(delay);
  retention_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) {
      PruneOnce();
    }
  });
}

void Engine::PruneOnce() {
  const RetentionPolicy& policy = limits_.retention;
  const int64_t now = clock_->NowUnixMs();
  auto before = [now](int64_t secs) { return secs > 0 ? now - secs * 1000 : 0; };
  int64_t events = 0;
  int64_t audit = 0;
  int64_t ledger = 0;
  absl::Status status = store_->InTransaction([&]() -> absl::Status {
    // The running daemon's ktesio_events_total sees what is about to go (a restarted one reads
    // events_pruned, which PruneEvents adds to).
    if (absl::Status counted = AdvanceEventCounts(); !counted.ok()) {
      return counted;
    }
    absl::StatusOr<int64_t> n = store_->PruneEvents(
        store::EventLog::kEvents, before(policy.events_secs), policy.events_max, kBatch);
    if (!n.ok()) {
      return n.status();
    }
    events = *n;
    n = store_->PruneEvents(store::EventLog::kAudit, before(policy.audit_secs), 0, kBatch);
    if (!n.ok()) {
      return n.status();
    }
    audit = *n;
    if (policy.ledger_secs > 0) {
      n = store_->PruneLedger(before(policy.ledger_secs), kBatch);
      if (!n.ok()) {
        return n.status();
      }
      ledger = *n;
    }
    return absl::OkStatus();
  });
  if (status.ok() && policy.ledger_secs > 0) {
    usage_.ReleaseEndedRunCopies(before(policy.ledger_secs));
  }
  if (!status.ok()) {
    log_->warn("retention: pruning failed (retried at the next interval): {}",
               std::string(status.message()));
    ScheduleRetention(std::chrono::seconds(std::max<int64_t>(1, policy.interval_secs)));
    return;
  }
  if (events + audit + ledger > 0) {
    log_->info("retention: pruned events={} audit={} ledger_rows={}", events, audit, ledger);
  }
  // A full batch of rows holds at least kBatch events (a usage span holds several).
  const bool more = events >= kBatch || audit == kBatch || ledger == kBatch;
  if (more) {
    Post([this] { PruneOnce(); });  // the next batch after whatever else is queued
    return;
  }
  ScheduleRetention(std::chrono::seconds(std::max<int64_t>(1, policy.interval_secs)));
}

}  // namespace ktesio::daemon::engine
