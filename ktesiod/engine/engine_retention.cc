// Retention: the engine's pruner (docs/operations.md "Retention"). History older than the
// policy goes in small transactions on the owner thread, interleaved with everything else;
// per-run totals stay, so usage, budgets and dollars never change when detail is pruned. And
// the usage copy of each run gives its ingested bytes back to the filesystem.

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "metering/ingest.h"
#include "supervisor/supervisor.h"

namespace ktesio::daemon::engine {
namespace {

constexpr int64_t kBatch = 2000;              // rows per transaction
constexpr int64_t kPunchGranule = 64 * 1024;  // release usage copies in 64 KiB steps
constexpr int64_t kKeepIngested = 16 << 20;   // of a live run's copy, kept for restores

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
    ReleaseEndedRunCopies(before(policy.ledger_secs));
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
  const bool more = events == kBatch || audit == kBatch || ledger == kBatch;
  if (more) {
    Post([this] { PruneOnce(); });  // the next batch after whatever else is queued
    return;
  }
  ScheduleRetention(std::chrono::seconds(std::max<int64_t>(1, policy.interval_secs)));
}

namespace {

// Gives back the disk blocks of [0, length) of `path`, keeping its size (offsets stay valid and
// a writer may keep appending). False when the filesystem cannot punch holes.
bool PunchHole(const std::string& path, off_t length) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return true;  // gone already: nothing to give back
  }
  const bool ok =
      length <= 0 || ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, length) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

void Engine::ReleaseIngestedUsage(const store::InstanceRow& row, int64_t run,
                                  const std::string& path) {
  // A live run's copy keeps its last kKeepIngested bytes although they are in the store: a
  // backup restored later re-ingests from its own, older cursors (operations.md "Backup and
  // restore"). Ended runs give their copies back with their ledger detail (PruneOnce).
  if (run != row.current_run) {
    return;
  }
  absl::StatusOr<int64_t> offset = store_->UsageOffset(row.id, run);
  if (!offset.ok() || *offset < kKeepIngested + kPunchGranule) {
    return;
  }
  const off_t length =
      static_cast<off_t>((*offset - kKeepIngested) / kPunchGranule * kPunchGranule);
  if (!PunchHole(path, length) && !usage_punch_unsupported_) {
    usage_punch_unsupported_ = true;
    log_->info(
        "usage copies are not trimmed on this filesystem ({}): they keep their ingested "
        "bytes until the run directory is removed",
        std::strerror(errno));
  }
}

void Engine::ReleaseEndedRunCopies(int64_t ended_before_ms) {
  absl::StatusOr<std::vector<store::Store::EndedRun>> runs =
      store_->RunsEndedBetween(usage_released_through_ms_, ended_before_ms);
  if (!runs.ok()) {
    return;  // tried again at the next pass, over the same window
  }
  for (const store::Store::EndedRun& ended : *runs) {
    const std::string path =
        metering::UsageFilePath(supervisor::Supervisor::RunDir(ended.home), ended.run);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || st.st_blocks == 0) {
      continue;
    }
    PunchHole(path, (st.st_size + 4095) / 4096 * 4096);  // the last partial block too
  }
  usage_released_through_ms_ = ended_before_ms;
}

}  // namespace ktesio::daemon::engine
