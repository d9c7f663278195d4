// The engine's usage side: watching run dirs, ingesting self-reported usage, usage views.

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "fs/fs.h"
#include "ktesio/contract/error.h"
#include "logs/segments.h"
#include "metering/ingest.h"

namespace ktesio::daemon::engine {

void Engine::WatchUsage(const store::InstanceRow& row) {
  v1::AdapterSnapshot snapshot;
  snapshot.ParseFromString(row.snapshot);
  if (snapshot.metering_source() != v1::METERING_SOURCE_SELF_REPORTED) {
    return;
  }
  const std::string run_dir = supervisor::Supervisor::RunDir(row.home);
  fs::MakeDirs(run_dir, 0700).IgnoreError();
  const std::string name = row.name;
  const int64_t run = row.current_run;
  UsageWatch& watch = usage_watches_[name];
  watch.run = run;
  watch.watch = std::make_unique<fs::DirectoryWatch>(io_, run_dir,
                                                     [this, name, run] { IngestUsage(name, run); });
  IngestUsage(name, run);  // whatever was written before the watch existed
}

void Engine::IngestUsage(const std::string& name, int64_t run) {
  absl::StatusOr<std::optional<store::InstanceRow>> row = store_->FindInstance(name);
  if (!row.ok() || !row->has_value()) {
    return;
  }
  const std::string path =
      metering::UsageFilePath(supervisor::Supervisor::RunDir((*row)->home), run);
  absl::StatusOr<metering::IngestResult> result =
      metering::IngestUsageFile(*store_, **row, run, path, "self-reported", NowUnixMs());
  if (!result.ok()) {
    log_->error("usage ingestion failed instance={} run={} error={}", name, run,
                std::string(result.status().message()));
    return;
  }
  for (const std::string& problem : result->malformed) {
    log_->warn("malformed usage line instance={} run={} error=\"{}\"", name, run, problem);
    logs::AppendEngineLine((*row)->home + "/logs", NowUnixMs(),
                           absl::StrCat("malformed KTESIO_USAGE line ignored: ", problem))
        .IgnoreError();
  }
  if (result->duplicates > 0) {
    log_->info("usage replay ignored instance={} run={} duplicates={}", name, run,
               result->duplicates);
  }
  if (result->accepted > 0) {
    PublishEvents();
  }
}

void Engine::StartUsageAfterReconcile() {
  absl::StatusOr<std::vector<store::InstanceRow>> rows = store_->ListInstances();
  if (!rows.ok()) {
    return;
  }
  for (const store::InstanceRow& row : *rows) {
    if (row.state == "starting" || row.state == "running" || row.state == "paused" ||
        row.state == "stopping") {
      WatchUsage(row);
    }
  }
}

void Engine::FillUsage(const store::InstanceRow& row, v1::UsageView* usage) const {
  absl::StatusOr<store::Store::UsageTotals> totals = store_->Usage(row.id, row.current_run);
  if (!totals.ok()) {
    return;
  }
  usage->set_cumulative_input_tokens(totals->cumulative_input);
  usage->set_cumulative_output_tokens(totals->cumulative_output);
  usage->set_current_run_input_tokens(totals->run_input);
  usage->set_current_run_output_tokens(totals->run_output);
}

absl::Status Engine::GetUsage(const v1::GetUsageRequest& request, v1::GetUsageResponse* response) {
  if (!request.name().empty()) {
    absl::StatusOr<store::InstanceRow> row = registry_.Find(request.name());
    if (!row.ok()) {
      return row.status();
    }
    response->set_name(row->name);
    FillUsage(*row, response->mutable_usage());
    return absl::OkStatus();
  }
  v1::ListAgentsResponse all;
  if (absl::Status status = ListAgents(&all); !status.ok()) {
    return status;
  }
  *response->mutable_totals() = all.totals();
  return absl::OkStatus();
}

}  // namespace ktesio::daemon::engine
