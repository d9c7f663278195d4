#include "engine/engine.h"

#include <unistd.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/view.h"
#include "ktesio/contract/declaration.h"
#include "ktesio/contract/error.h"
#include "ktesio/v1/version.h"

namespace ktesio::daemon::engine {

namespace reason = contract::reason;

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const DaemonPaths& paths) {
  absl::StatusOr<std::unique_ptr<store::Store>> store =
      store::Store::Open(paths.state_dir + "/state.db");
  if (!store.ok()) {
    return store.status();
  }
  return std::unique_ptr<Engine>(new Engine(paths, std::move(*store)));
}

Engine::Engine(DaemonPaths paths, std::unique_ptr<store::Store> store)
    : paths_(std::move(paths)),
      started_at_ms_(NowUnixMs()),
      store_(std::move(store)),
      registry_(*store_, paths_.state_dir, NowUnixMs),
      work_(boost::asio::make_work_guard(io_)) {}

Engine::~Engine() { Stop(); }

void Engine::Start() {
  thread_ = std::thread([this] { io_.run(); });
}

void Engine::Stop() {
  work_.reset();
  if (thread_.joinable()) {
    thread_.join();
  }
}

absl::Status Engine::GetStatus(v1::GetStatusResponse* response) {
  v1::GetVersionResponse* version = response->mutable_version();
  version->set_daemon_version(std::string(v1::kKtesioVersion));
  version->set_api_version(std::string(v1::kApiVersion));
  version->set_api_major(v1::kApiMajor);
  version->set_contract_version(std::string(contract::kContractVersion));
  const int64_t now = NowUnixMs();
  response->set_started_at_unix_ms(started_at_ms_);
  response->set_uptime_ms(now - started_at_ms_);
  response->set_state_dir(paths_.state_dir);
  response->set_socket_path(paths_.socket_path);
  response->set_system_mode(paths_.system_mode);
  response->set_pid(static_cast<uint32_t>(getpid()));
  response->set_os(std::string(contract::OsName(contract::CurrentOs())));
  absl::StatusOr<std::vector<store::InstanceRow>> rows = store_->ListInstances();
  if (!rows.ok()) {
    return rows.status();
  }
  response->set_instances_total(static_cast<uint32_t>(rows->size()));
  for (const store::InstanceRow& row : *rows) {
    (*response->mutable_instances_by_state())[row.state] += 1;
  }
  return absl::OkStatus();
}

absl::Status Engine::RegisterAgent(const v1::RegisterAgentRequest& request,
                                   v1::RegisterAgentResponse* response) {
  absl::StatusOr<store::InstanceRow> row = registry_.Register(request);
  if (!row.ok()) {
    return row.status();
  }
  *response->mutable_instance() = BuildInstanceView(*row);
  return absl::OkStatus();
}

absl::Status Engine::ListAgents(v1::ListAgentsResponse* response) {
  absl::StatusOr<std::vector<store::InstanceRow>> rows = store_->ListInstances();
  if (!rows.ok()) {
    return rows.status();
  }
  for (const store::InstanceRow& row : *rows) {
    *response->add_instances() = BuildInstanceView(row);
  }
  *response->mutable_totals() = BuildFleetTotals(response->instances());
  return absl::OkStatus();
}

absl::Status Engine::GetAgent(const v1::GetAgentRequest& request, v1::GetAgentResponse* response) {
  absl::StatusOr<store::InstanceRow> row = registry_.Find(request.name());
  if (!row.ok()) {
    return row.status();
  }
  *response->mutable_instance() = BuildInstanceView(*row);
  return absl::OkStatus();
}

absl::Status Engine::RemoveAgent(const v1::RemoveAgentRequest& request,
                                 v1::RemoveAgentResponse* response) {
  absl::StatusOr<store::InstanceRow> row = registry_.Find(request.name());
  if (!row.ok()) {
    return row.status();
  }
  const bool live = row->state == "starting" || row->state == "running" ||
                    row->state == "paused" || row->state == "stopping";
  if (live) {
    if (!request.force()) {
      return contract::MakeError(
          absl::StatusCode::kFailedPrecondition, reason::kInvalidState,
          absl::StrCat("cannot remove Agent Instance '", row->name, "' while it is '", row->state,
                       "' (stop it first, or pass --force)"));
    }
    return contract::MakeError(absl::StatusCode::kUnimplemented, reason::kUnimplemented,
                               "remove --force of a live instance needs the supervisor, which "
                               "this build does not have yet");
  }
  if (absl::Status status = registry_.Remove(*row, request.delete_home()); !status.ok()) {
    return status;
  }
  response->set_name(row->name);
  response->set_agent_home(row->home);
  response->set_home_deleted(request.delete_home());
  return absl::OkStatus();
}

}  // namespace ktesio::daemon::engine
