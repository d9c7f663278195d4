// The engine's budget side: acting on breaches committed with usage (pause or stop the agent,
// block its model calls), also those committed before a daemon restart; and the usage read.

#include <unistd.h>

#include <cstdlib>
#include <set>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"
#include "logs/segments.h"

namespace ktesio::daemon::engine {

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

}  // namespace ktesio::daemon::engine
