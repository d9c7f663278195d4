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

namespace ktesio::daemon::engine {
namespace {

constexpr int64_t kBatch = 2000;              // rows per transaction
constexpr int64_t kPunchGranule = 64 * 1024;  // release usage copies in 64 KiB steps

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
  const int64_t now = NowUnixMs();
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

absl::StatusOr<std::string> Engine::PrunedNotice(store::EventLog log, int64_t since,
                                                 int64_t* first_available) {
  absl::StatusOr<int64_t> first = store_->FirstCursor(log);
  if (!first.ok()) {
    return first.status();
  }
  *first_available = *first;
  if (*first == 0 || since + 1 >= *first) {
    return std::string();
  }
  return absl::StrCat("events after cursor ", since, " up to ", *first - 1,
                      " were pruned by the retention policy; the replay starts at cursor ", *first);
}

void Engine::ReleaseIngestedUsage(const store::InstanceRow& row, int64_t run,
                                  const std::string& path) {
  absl::StatusOr<int64_t> offset = store_->UsageOffset(row.id, run);
  // A live run's copy is released in whole granules (the shim still appends); an ended run's
  // up to its last ingested byte, so a finished copy keeps no disk blocks at all.
  const bool ended = run != row.current_run || (row.state != "starting" && row.state != "running" &&
                                                row.state != "paused" && row.state != "stopping");
  if (!offset.ok() || *offset == 0 || (!ended && *offset < kPunchGranule)) {
    return;
  }
  // The bytes below the durable cursor are in the store; their blocks go back to the
  // filesystem. Offsets stay valid (the file keeps its size; the range reads as zeros), so the
  // shim keeps appending and a crash at any point loses nothing.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return;
  }
  off_t length = static_cast<off_t>(ended ? *offset : *offset / kPunchGranule * kPunchGranule);
  struct stat st {};
  if (ended && ::fstat(fd, &st) == 0 && *offset >= st.st_size) {
    // Everything is ingested: the last, partial block goes too (the punch may pass the end of a
    // file whose size it keeps).
    length = (st.st_size + 4095) / 4096 * 4096;
  }
  if (::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, length) != 0 &&
      !usage_punch_unsupported_) {
    usage_punch_unsupported_ = true;
    log_->info(
        "usage copies are not trimmed on this filesystem ({}): they keep their ingested "
        "bytes until the run directory is removed",
        std::strerror(errno));
  }
  ::close(fd);
}

}  // namespace ktesio::daemon::engine
