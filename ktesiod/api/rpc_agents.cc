// The v1 edge of the daemon's status, the instances (registration, views, labels), usage and log
// reads.

#include <unistd.h>

#include "api/rpc.h"
#include "engine/log_feed.h"
#include "ktesio/contract/declaration.h"
#include "ktesio/contract/status_macros.h"
#include "ktesio/v1/version.h"

namespace ktesio::daemon::api::rpc {

absl::Status GetStatus(engine::Engine& engine, v1::GetStatusResponse* response) {
  KT_ASSIGN_OR_RETURN(engine::Engine::StatusReport report, engine.Status());
  v1::GetVersionResponse* version = response->mutable_version();
  version->set_daemon_version(std::string(v1::kKtesioVersion));
  version->set_api_version(std::string(v1::kApiVersion));
  version->set_api_major(v1::kApiMajor);
  version->set_contract_version(std::string(contract::kContractVersion));
  response->set_started_at_unix_ms(engine.started_at_ms());
  response->set_uptime_ms(report.uptime_ms);
  response->set_state_dir(engine.paths().state_dir);
  response->set_socket_path(engine.paths().socket_path);
  response->set_system_mode(engine.paths().system_mode);
  response->set_pid(static_cast<uint32_t>(getpid()));
  response->set_os(std::string(contract::OsName(contract::CurrentOs())));
  response->set_metrics_address(engine.metrics_address());
  for (std::string& problem : report.problems) {
    response->add_problems(std::move(problem));
  }
  response->set_instances_total(report.instances_total);
  response->mutable_instances_by_state()->insert(report.instances_by_state.begin(),
                                                 report.instances_by_state.end());
  return absl::OkStatus();
}

absl::Status RegisterAgent(engine::Engine& engine, const v1::RegisterAgentRequest& request,
                           v1::RegisterAgentResponse* response) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row,
                      engine.instances().Register(request, engine.limits().max_instances));
  *response->mutable_instance() = engine.instances().View(row, nullptr, true);
  return absl::OkStatus();
}

absl::Status ListAgents(engine::Engine& engine, const v1::ListAgentsRequest& request,
                        v1::ListAgentsResponse* response) {
  KT_ASSIGN_OR_RETURN(contract::Selector selector, contract::Selector::Parse(request.selector()));
  KT_ASSIGN_OR_RETURN(std::vector<engine::Instances::Listed> listed,
                      engine.instances().List(&selector));
  engine.instances().Views(listed, !request.skip_resources(), response);
  return absl::OkStatus();
}

absl::Status GetAgent(engine::Engine& engine, const v1::GetAgentRequest& request,
                      v1::GetAgentResponse* response) {
  KT_ASSIGN_OR_RETURN(*response->mutable_instance(), engine.instances().View(request.name(), true));
  return absl::OkStatus();
}

absl::Status LabelAgent(engine::Engine& engine, const v1::LabelAgentRequest& request,
                        v1::LabelAgentResponse* response) {
  engine::Instances::LabelEdit edit;
  edit.set.insert(request.set().begin(), request.set().end());
  edit.remove.assign(request.remove().begin(), request.remove().end());
  KT_ASSIGN_OR_RETURN(engine::Instances::Labelled labelled,
                      engine.instances().Label(request.name(), edit));
  response->set_changed(labelled.changed);
  *response->mutable_instance() = engine.instances().View(labelled.row, &labelled.labels);
  return absl::OkStatus();
}

absl::Status GetUsage(engine::Engine& engine, const v1::GetUsageRequest& request,
                      v1::GetUsageResponse* response) {
  if (!request.name().empty()) {
    KT_ASSIGN_OR_RETURN(*response->mutable_usage(), engine.instances().Usage(request.name()));
    response->set_name(request.name());
    return absl::OkStatus();
  }
  KT_ASSIGN_OR_RETURN(std::vector<engine::Instances::Listed> listed, engine.instances().List());
  v1::ListAgentsResponse all;
  engine.instances().Views(listed, false, &all);
  *response->mutable_totals() = all.totals();
  return absl::OkStatus();
}

absl::Status ReadLogs(engine::Engine& engine, const v1::ReadLogsRequest& request,
                      v1::ReadLogsResponse* response) {
  KT_RETURN_IF_ERROR(engine.instances().Find(request.filter().name()).status());
  KT_ASSIGN_OR_RETURN(logs::LogQuery query, engine::LogQueryOf(request.filter()));
  if (request.filter().no_retained()) {
    return absl::OkStatus();
  }
  return engine.ReadLogs(request.filter().name(), query, response->mutable_lines());
}

}  // namespace ktesio::daemon::api::rpc
