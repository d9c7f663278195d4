#pragma once

// Self-reported usage, one owner on the engine thread: a directory watch on the run dir of each
// live self-reported run, ingestion of its usage file into the store (budget breaches are
// committed in the same transaction), retries with backoff while the store refuses, and giving
// the ingested bytes of each usage copy back to the filesystem. What to do about a committed
// breach is not the meter's business: it reports breaches to its owner (Hooks::on_breach), who
// pauses or stops the agent.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "boost/asio/io_context.hpp"
#include "budget/budget.h"
#include "engine/owner_context.h"
#include "fs/directory_watch.h"
#include "ktesio/v1/agent.pb.h"

namespace ktesio::daemon::engine {

class UsageMeter {
 public:
  struct Hooks {
    // Usage events were committed (subscribers may be told).
    std::function<void()> on_recorded;
    // Breaches were committed with a batch of `run`'s usage; `limits` were in force.
    std::function<void(const store::InstanceRow& row, int64_t run,
                       const std::vector<budget::Breach>& breaches, const budget::Limits& limits)>
        on_breach;
  };
  // `io` (which serves its directory watches) and what `context` points to outlive the meter.
  UsageMeter(boost::asio::io_context& io, OwnerContext context, Hooks hooks);
  UsageMeter(const UsageMeter&) = delete;
  UsageMeter& operator=(const UsageMeter&) = delete;

  // A run started: watch its run dir (self-reported agents only) and take what is there.
  void Watch(const store::InstanceRow& row);
  // Every live instance of `rows` (after the daemon re-adopted them).
  void WatchLive(const std::vector<store::InstanceRow>& rows);
  // The run of `row` is over: take its last lines, then stop watching.
  void RunEnded(const store::InstanceRow& row);
  // Ingests every complete line of `name`'s run `run` past the durable cursor.
  void Ingest(const std::string& name, int64_t run);

  // Frees the usage copies of runs that ended in [released_through, ended_before_ms): their
  // per-call ledger detail goes at the same age.
  void ReleaseEndedRunCopies(int64_t ended_before_ms);

  // Drops every watch and retry timer without ingesting (shutdown, before the io_context goes).
  void Clear();

  size_t watched() const { return watches_.size(); }

 private:
  void Retry(const std::string& name, int64_t run, const absl::Status& error);
  // Frees the disk blocks of a live run's usage copy below its durable ingestion cursor, less
  // the last 16 MiB (kept so a restored backup can re-ingest from its older cursor).
  void ReleaseIngested(const store::InstanceRow& row, int64_t run, const std::string& path);

  struct Watched {
    int64_t run = 0;
    std::unique_ptr<fs::DirectoryWatch> watch;
  };
  // Ingestion the store refused, retried with backoff until recorded.
  struct Retrying {
    std::unique_ptr<time::Timer> timer;
    int attempts = 0;
  };

  boost::asio::io_context& io_;
  const OwnerContext context_;
  Hooks hooks_;
  std::map<std::string, Watched> watches_;
  std::map<std::pair<std::string, int64_t>, Retrying> retries_;
  bool punch_unsupported_ = false;  // logged once
  int64_t released_through_ms_ = 0;
};

// Fills the usage view of `row` (and, when `budget` is given, the budget view; `has_budget`
// says whether any limit applies — the JSON then shows `budget: null`). A store that cannot be
// read leaves both untouched.
void FillUsageView(store::Store& store, const ConfigBridge& config, const store::InstanceRow& row,
                   v1::UsageView* usage, v1::BudgetView* budget, bool* has_budget);

}  // namespace ktesio::daemon::engine
