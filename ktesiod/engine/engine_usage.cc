// The engine's usage side: watching run dirs, ingesting self-reported usage, usage views.

#include <unistd.h>

#include <cstdlib>
#include <set>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "fs/fs.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"
#include "logs/segments.h"
#include "metering/ingest.h"

namespace ktesio::daemon::engine {

void Engine::WatchUsage(const store::InstanceRow& row) {
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
  UsageWatch& watch = usage_watches_[name];
  watch.run = run;
  watch.watch = std::make_unique<fs::DirectoryWatch>(io_, run_dir,
                                                     [this, name, run] { IngestUsage(name, run); });
  IngestUsage(name, run);  // whatever was written before the watch existed
}

void Engine::RetryUsage(const std::string& name, int64_t run, const absl::Status& error) {
  // The lines stay in the run's usage file past the durable cursor: retrying loses and
  // duplicates nothing, even for a run that has ended (its watch is gone).
  UsageRetry& retry = usage_retries_[{name, run}];
  if (retry.timer == nullptr) {
    retry.timer = std::make_unique<boost::asio::steady_timer>(io_);
  }
  const int64_t delay_ms = std::min<int64_t>(int64_t{100} << std::min(retry.attempts, 6), 5000);
  retry.attempts += 1;
  health_.Set("store:usage:" + name, absl::StrCat("usage lines of run ", run, " of '", name,
                                                  "' are not recorded yet: ", error.message(),
                                                  "; retrying every ", delay_ms, " ms"));
  retry.timer->expires_after(std::chrono::milliseconds(delay_ms));
  retry.timer->async_wait([this, name, run](const boost::system::error_code& ec) {
    if (!ec) {
      IngestUsage(name, run);
    }
  });
}

void Engine::IngestUsage(const std::string& name, int64_t run) {
  absl::StatusOr<std::optional<store::InstanceRow>> row = store_->FindInstance(name);
  if (!row.ok()) {
    RetryUsage(name, run, row.status());
    return;
  }
  if (!row->has_value()) {
    usage_retries_.erase({name, run});  // removed meanwhile: nothing to record
    health_.Set("store:usage:" + name, "");
    return;
  }
  const std::string path =
      metering::UsageFilePath(supervisor::Supervisor::RunDir((*row)->home), run);
  const budget::Limits limits = config_.Limits(**row);
  absl::StatusOr<metering::IngestResult> result = metering::IngestUsageFile(
      *store_, **row, run, path, "self-reported", limits, clock_->NowUnixMs());
  if (!result.ok()) {
    log_->error("usage ingestion failed instance={} run={} error={}", name, run,
                std::string(result.status().message()));
    RetryUsage(name, run, result.status());
    return;
  }
  if (auto retry = usage_retries_.find({name, run}); retry != usage_retries_.end()) {
    log_->info("usage of instance={} run={} recorded after {} failed attempt(s)", name, run,
               retry->second.attempts);
    usage_retries_.erase(retry);
    health_.Set("store:usage:" + name, "");
  }
  for (const std::string& problem : result->malformed) {
    log_->warn("malformed usage line instance={} run={} error=\"{}\"", name, run, problem);
    logs::AppendEngineLine((*row)->home + "/logs", clock_->NowUnixMs(),
                           absl::StrCat("malformed KTESIO_USAGE line ignored: ", problem))
        .IgnoreError();  // informational: the line is reported in the daemon log above
  }
  if (result->duplicates > 0) {
    log_->info("usage replay ignored instance={} run={} duplicates={}", name, run,
               result->duplicates);
  }
  if (result->accepted > 0) {
    events_.Publish();
  }
  ReleaseIngestedUsage(**row, run, path);
  ActOnBreaches(**row, run, result->breaches, limits);
}

void Engine::ActOnBreaches(const store::InstanceRow& row, int64_t run,
                           const std::vector<budget::Breach>& breaches,
                           const budget::Limits& limits) {
  // The breaches are committed with the usage that crossed them; now act on the first one.
  if (breaches.empty() || run != row.current_run) {
    return;
  }
  const budget::Breach& first = breaches.front();
  const std::string cause = absl::StrCat("budget-exceeded{scope=", budget::ScopeName(first.scope),
                                         ",dimension=", budget::DimensionName(first.dimension),
                                         ",limit=", first.limit, ",observed=", first.observed,
                                         ",action=", budget::ActionName(limits.action), "}");
  log_->warn("budget breach instance={} {}", row.name, cause);
  logs::AppendEngineLine(row.home + "/logs", clock_->NowUnixMs(), cause)
      .IgnoreError();  // informational: the breach row and event are the record
  if (limits.action != budget::Action::kWarn) {
    // The breach (pending) is committed; the action is not taken yet. A test makes the daemon
    // die right here to prove the next one takes it (KTESIO_TEST_CRASH_POINT, docs/testing.md).
    CrashPointForTests("after-breach-commit");
    // Engine-observed: no further model call gets through, whatever the pause level achieved.
    proxy_->Block(row.name);
    supervisor_.BudgetAction(row.name, limits.action == budget::Action::kStop, cause);
  }
}

void Engine::CrashPointForTests(std::string_view point) const {
  static const std::string armed = [] {
    const char* value = std::getenv("KTESIO_TEST_CRASH_POINT");
    return value == nullptr ? std::string() : std::string(value);
  }();
  if (!armed.empty() && armed == point) {
    log_->warn("KTESIO_TEST_CRASH_POINT={}: exiting as if killed", std::string(point));
    _exit(99);
  }
}

void Engine::ResumePendingBudgetActions() {
  absl::StatusOr<std::vector<store::Store::PendingBreach>> pending = store_->PendingBreaches();
  if (!pending.ok()) {
    log_->error("pending budget actions could not be read: {}",
                std::string(pending.status().message()));
    return;
  }
  if (pending->empty()) {
    return;
  }
  absl::StatusOr<std::vector<store::InstanceRow>> rows = store_->ListInstances();
  if (!rows.ok()) {
    log_->error("pending budget actions: instances could not be read: {}",
                std::string(rows.status().message()));
    return;
  }
  std::set<std::pair<int64_t, int64_t>> handled;  // (instance, run): one action per run
  for (const store::Store::PendingBreach& breach : *pending) {
    if (!handled.insert({breach.instance_id, breach.run}).second) {
      continue;
    }
    const store::InstanceRow* row = nullptr;
    for (const store::InstanceRow& candidate : *rows) {
      if (candidate.id == breach.instance_id) {
        row = &candidate;
      }
    }
    const supervisor::State state =
        row != nullptr ? supervisor::RowState(*row) : supervisor::State::kRegistered;
    const bool live =
        row != nullptr && row->current_run == breach.run &&
        (state == supervisor::State::kRunning || state == supervisor::State::kStarting ||
         (state == supervisor::State::kPaused && breach.action == "stop"));
    if (!live) {
      // The run is over, or the instance already left running: nothing is left to do.
      store_->ClearPendingBreaches(breach.instance_id, breach.run)
          .IgnoreError();  // retried next start
      continue;
    }
    const std::string cause = absl::StrCat(
        "budget-exceeded{scope=", breach.scope, ",dimension=", breach.dimension,
        ",limit=", breach.limit, ",observed=", breach.observed, ",action=", breach.action, "}");
    log_->warn("budget breach committed before a daemon restart is acted on now instance={} {}",
               row->name, cause);
    logs::AppendEngineLine(row->home + "/logs", clock_->NowUnixMs(),
                           cause + " (acted on after a daemon restart)")
        .IgnoreError();  // the engine line is informational; the transition records the action
    proxy_->Block(row->name);
    supervisor_.BudgetAction(row->name, breach.action == "stop", cause);
  }
}

void Engine::StartUsageAfterReconcile() {
  absl::StatusOr<std::vector<store::InstanceRow>> rows = store_->ListInstances();
  if (!rows.ok()) {
    return;
  }
  for (const store::InstanceRow& row : *rows) {
    if (supervisor::IsLive(supervisor::RowState(row))) {
      WatchUsage(row);
    }
  }
}

void Engine::FillUsage(const store::InstanceRow& row, v1::UsageView* usage,
                       v1::BudgetView* budget_view, bool* has_budget) const {
  absl::StatusOr<store::Store::UsageTotals> totals = store_->Usage(row.id, row.current_run);
  if (!totals.ok()) {
    return;
  }
  usage->set_cumulative_input_tokens(totals->cumulative_input);
  usage->set_cumulative_output_tokens(totals->cumulative_output);
  usage->set_current_run_input_tokens(totals->run_input);
  usage->set_current_run_output_tokens(totals->run_output);
  usage->set_unknown_usage_calls(totals->unknown_calls);
  const budget::Limits limits = config_.Limits(row);
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

absl::Status Engine::GetUsage(const v1::GetUsageRequest& request, v1::GetUsageResponse* response) {
  if (!request.name().empty()) {
    KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(request.name()));
    response->set_name(row.name);
    FillUsage(row, response->mutable_usage(), nullptr, nullptr);
    return absl::OkStatus();
  }
  v1::ListAgentsResponse all;
  KT_RETURN_IF_ERROR(ListAgentViews(&all, false));
  *response->mutable_totals() = all.totals();
  return absl::OkStatus();
}

}  // namespace ktesio::daemon::engine
