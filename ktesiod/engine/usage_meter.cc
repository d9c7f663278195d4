#include "engine/usage_meter.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "fs/fs.h"
#include "logs/segments.h"
#include "metering/ingest.h"
#include "supervisor/supervisor.h"

namespace ktesio::daemon::engine {
namespace {

constexpr int64_t kPunchGranule = 64 * 1024;  // release usage copies in 64 KiB steps
constexpr int64_t kKeepIngested = 16 << 20;   // of a live run's copy, kept for restores

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

UsageMeter::UsageMeter(boost::asio::io_context& io, OwnerContext context, Hooks hooks)
    : io_(io), context_(std::move(context)), hooks_(std::move(hooks)) {}

void UsageMeter::Watch(const store::InstanceRow& row) {
  v1::AdapterSnapshot snapshot;
  // An unreadable snapshot still gets its usage watched: a usage file only exists for a
  // self-reported run, so watching costs nothing and loses nothing.
  if (snapshot.ParseFromString(row.snapshot) &&
      snapshot.metering_source() != v1::METERING_SOURCE_SELF_REPORTED) {
    return;
  }
  const std::string run_dir = supervisor::Supervisor::RunDir(row.home);
  fs::MakeDirs(run_dir, 0700).IgnoreError();  // the watch below reports a missing dir itself
  const std::string name = row.name;
  const int64_t run = row.current_run;
  Watched& watch = watches_[name];
  watch.run = run;
  // Only the run's usage file: the run dir's other records change at every start.
  const std::string path = metering::UsageFilePath(run_dir, run);
  watch.watch = std::make_unique<fs::DirectoryWatch>(io_, run_dir, path.substr(run_dir.size() + 1),
                                                     [this, name, run] { Ingest(name, run); });
  Ingest(name, run);  // whatever was written before the watch existed
}

void UsageMeter::WatchLive(const std::vector<store::InstanceRow>& rows) {
  for (const store::InstanceRow& row : rows) {
    if (supervisor::IsLive(supervisor::RowState(row))) {
      Watch(row);
    }
  }
}

void UsageMeter::RunEnded(const store::InstanceRow& row) {
  Ingest(row.name, row.current_run);
  watches_.erase(row.name);
}

void UsageMeter::Clear() {
  watches_.clear();
  retries_.clear();
}

void UsageMeter::Retry(const std::string& name, int64_t run, const absl::Status& error) {
  // The lines stay in the run's usage file past the durable cursor: retrying loses and
  // duplicates nothing, even for a run that has ended (its watch is gone).
  Retrying& retry = retries_[{name, run}];
  if (retry.timer == nullptr) {
    retry.timer = context_.clock->NewTimer();
  }
  const int64_t delay_ms = std::min<int64_t>(int64_t{100} << std::min(retry.attempts, 6), 5000);
  retry.attempts += 1;
  context_.health->Set("store:usage:" + name,
                       absl::StrCat("usage lines of run ", run, " of '", name,
                                    "' are not recorded yet: ", error.message(),
                                    "; retrying every ", delay_ms, " ms"));
  retry.timer->Arm(std::chrono::milliseconds(delay_ms), [this, name, run] { Ingest(name, run); });
}

void UsageMeter::Ingest(const std::string& name, int64_t run) {
  absl::StatusOr<std::optional<store::InstanceRow>> row = context_.store->FindInstance(name);
  if (!row.ok()) {
    Retry(name, run, row.status());
    return;
  }
  if (!row->has_value()) {
    retries_.erase({name, run});  // removed meanwhile: nothing to record
    context_.health->Set("store:usage:" + name, "");
    return;
  }
  const std::string path =
      metering::UsageFilePath(supervisor::Supervisor::RunDir((*row)->home), run);
  const budget::Limits limits = context_.config->Limits(**row);
  absl::StatusOr<metering::IngestResult> result = metering::IngestUsageFile(
      *context_.store, **row, run, path, "self-reported", limits, context_.clock->NowUnixMs());
  if (!result.ok()) {
    context_.log->error("usage ingestion failed instance={} run={} error={}", name, run,
                        std::string(result.status().message()));
    Retry(name, run, result.status());
    return;
  }
  if (auto retry = retries_.find({name, run}); retry != retries_.end()) {
    context_.log->info("usage of instance={} run={} recorded after {} failed attempt(s)", name, run,
                       retry->second.attempts);
    retries_.erase(retry);
    context_.health->Set("store:usage:" + name, "");
  }
  for (const std::string& problem : result->malformed) {
    context_.log->warn("malformed usage line instance={} run={} error=\"{}\"", name, run, problem);
    logs::AppendEngineLine((*row)->home + "/logs", context_.clock->NowUnixMs(),
                           absl::StrCat("malformed KTESIO_USAGE line ignored: ", problem))
        .IgnoreError();  // informational: the line is reported in the daemon log above
  }
  if (result->duplicates > 0) {
    context_.log->info("usage replay ignored instance={} run={} duplicates={}", name, run,
                       result->duplicates);
  }
  if (result->accepted > 0) {
    hooks_.on_recorded();
  }
  ReleaseIngested(**row, run, path);
  if (!result->breaches.empty()) {
    hooks_.on_breach(**row, run, result->breaches, limits);
  }
}

void UsageMeter::ReleaseIngested(const store::InstanceRow& row, int64_t run,
                                 const std::string& path) {
  // A live run's copy keeps its last kKeepIngested bytes although they are in the store: a
  // backup restored later re-ingests from its own, older cursors (operations.md "Backup and
  // restore"). Ended runs give their copies back with their ledger detail (PruneOnce).
  if (run != row.current_run) {
    return;
  }
  absl::StatusOr<int64_t> offset = context_.store->UsageOffset(row.id, run);
  if (!offset.ok() || *offset < kKeepIngested + kPunchGranule) {
    return;
  }
  const off_t length =
      static_cast<off_t>((*offset - kKeepIngested) / kPunchGranule * kPunchGranule);
  if (!PunchHole(path, length) && !punch_unsupported_) {
    punch_unsupported_ = true;
    context_.log->info(
        "usage copies are not trimmed on this filesystem ({}): they keep their ingested "
        "bytes until the run directory is removed",
        std::strerror(errno));
  }
}

void UsageMeter::ReleaseEndedRunCopies(int64_t ended_before_ms) {
  absl::StatusOr<std::vector<store::Store::EndedRun>> runs =
      context_.store->RunsEndedBetween(released_through_ms_, ended_before_ms);
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
  released_through_ms_ = ended_before_ms;
}

void FillUsageView(store::Store& store, const ConfigBridge& config, const store::InstanceRow& row,
                   v1::UsageView* usage, v1::BudgetView* budget_view, bool* has_budget) {
  absl::StatusOr<store::Store::UsageTotals> totals = store.Usage(row.id, row.current_run);
  if (!totals.ok()) {
    return;
  }
  usage->set_cumulative_input_tokens(totals->cumulative_input);
  usage->set_cumulative_output_tokens(totals->cumulative_output);
  usage->set_current_run_input_tokens(totals->run_input);
  usage->set_current_run_output_tokens(totals->run_output);
  usage->set_unknown_usage_calls(totals->unknown_calls);
  const budget::Limits limits = config.Limits(row);
  // Dollars only with a full Rate: events are priced at the Rate in force when recorded.
  if (limits.rate.has_value()) {
    usage->set_cumulative_dollars(totals->cumulative_micros);
    usage->set_current_run_dollars(totals->run_micros);
    usage->set_estimate_label("estimated");
  }
  if (budget_view == nullptr) {
    return;
  }
  const uint64_t run_tokens = totals->run_input + totals->run_output;
  const uint64_t all_tokens = totals->cumulative_input + totals->cumulative_output;
  const bool priced = limits.rate.has_value();
  *has_budget = limits.tokens_per_run || limits.tokens_cumulative ||
                (priced && (limits.dollars_per_run || limits.dollars_cumulative));
  if (limits.tokens_per_run) {
    budget_view->set_per_run_limit(*limits.tokens_per_run);
    budget_view->set_per_run_remaining(
        run_tokens >= *limits.tokens_per_run ? 0 : *limits.tokens_per_run - run_tokens);
  }
  if (limits.tokens_cumulative) {
    budget_view->set_cumulative_limit(*limits.tokens_cumulative);
    budget_view->set_cumulative_remaining(
        all_tokens >= *limits.tokens_cumulative ? 0 : *limits.tokens_cumulative - all_tokens);
  }
  if (priced && limits.dollars_per_run) {
    budget_view->set_per_run_cost_cap(*limits.dollars_per_run);
    budget_view->set_per_run_dollars_remaining(
        std::max<int64_t>(0, *limits.dollars_per_run - totals->run_micros));
  }
  if (priced && limits.dollars_cumulative) {
    budget_view->set_cumulative_cost_cap(*limits.dollars_cumulative);
    budget_view->set_cumulative_dollars_remaining(
        std::max<int64_t>(0, *limits.dollars_cumulative - totals->cumulative_micros));
  }
  if (priced && (limits.dollars_per_run || limits.dollars_cumulative)) {
    budget_view->set_estimate_label("estimated");
  }
  budget_view->set_breach_action(limits.action == budget::Action::kStop ? v1::BREACH_ACTION_STOP
                                 : limits.action == budget::Action::kWarn
                                     ? v1::BREACH_ACTION_WARN
                                     : v1::BREACH_ACTION_PAUSE);
}

}  // namespace ktesio::daemon::engine
