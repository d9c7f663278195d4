#include "engine/engine.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/proxy_path.h"
#include "engine/view.h"
#include "ktesio/contract/declaration.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"
#include "ktesio/v1/version.h"
#include "process/shim_backend.h"

namespace ktesio::daemon::engine {

namespace reason = contract::reason;

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const DaemonPaths& paths,
                                                       std::shared_ptr<spdlog::logger> logger,
                                                       EngineOptions options) {
  KT_ASSIGN_OR_RETURN(std::unique_ptr<store::Store> store,
                      store::Store::Open(paths.state_dir + "/state.db"));
  KT_ASSIGN_OR_RETURN(ProxyKey key, LoadProxyKey(paths.state_dir));
  std::unique_ptr<Engine> engine(
      new Engine(paths, std::move(store), logger, std::move(options.seams)));
  engine->proxy_key_ = std::move(key);
  Engine* raw = engine.get();
  absl::StatusOr<std::unique_ptr<metering::MeteringProxy>> proxy = metering::MeteringProxy::Create(
      std::move(options.proxy),
      [raw](metering::CallRecord record) { raw->calls_.Queue(std::move(record)); }, logger);
  if (!proxy.ok()) {
    return proxy.status();
  }
  engine->proxy_ = std::move(*proxy);
  engine->SetLimits(options.limits);
  return engine;
}

Engine::Engine(DaemonPaths paths, std::unique_ptr<store::Store> store,
               std::shared_ptr<spdlog::logger> logger, EngineSeams seams)
    : paths_(std::move(paths)),
      log_(std::move(logger)),
      store_(std::move(store)),
      registry_(*store_, paths_.state_dir, [this] { return clock_->NowUnixMs(); }),
      config_(paths_.state_dir),
      work_(boost::asio::make_work_guard(io_)),
      clock_(seams.clock ? seams.clock(io_) : std::make_unique<time::SystemClock>(io_)),
      backend_(seams.backend ? seams.backend(io_) : std::make_unique<process::ShimBackend>(io_)),
      supervisor_(io_, *store_, *backend_, *clock_, log_,
                  supervisor::Hooks{
                      [this](const store::InstanceRow& row) { return config_.Settings(row); },
                      [this](const store::InstanceRow& row, const v1::AdapterSnapshot& snapshot) {
                        return DeliverFor(row, snapshot);
                      },
                      [this](const store::InstanceRow& row, supervisor::State from,
                             supervisor::State to) { OnTransition(row, from, to); },
                      [this](const std::string& instance, const std::string& problem) {
                        health_.Set("store:" + instance, problem);
                      }}) {
  started_at_ms_ = clock_->NowUnixMs();
  SyncLaunchHealth();
  if (health_.degraded()) {
    log_->error("degraded: {}; agents cannot start", backend_->Problem());
  }
}

Engine::~Engine() {
  Stop();
  // Directory watches belong to io_'s inotify service; io_ is declared (and so destroyed)
  // after them, so drop them first.
  logs_.Clear();
  usage_.Clear();  // its watches and timers belong to io_ too
}

void Engine::Start() {
  Post([this] {
    supervisor_.Reconcile();
    ReopenProxies();
    if (absl::StatusOr<std::vector<store::InstanceRow>> rows = store_->ListInstances(); rows.ok()) {
      usage_.WatchLive(*rows);
    }
    ResumePendingBudgetActions();
    ScheduleRetention(std::chrono::seconds(
        std::clamp<int64_t>(limits_.retention.interval_secs, 1, 60)));  // soon after start
  });
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "kt-engine");
    io_.run();
  });
}

void Engine::Stop() {
  // Agents keep running (their shims own them); pending watches and timers are simply dropped
  // and rebuilt by the next daemon's reconciliation.
  work_.reset();
  io_.stop();
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
  const int64_t now = clock_->NowUnixMs();
  response->set_started_at_unix_ms(started_at_ms_);
  response->set_uptime_ms(now - started_at_ms_);
  response->set_state_dir(paths_.state_dir);
  response->set_socket_path(paths_.socket_path);
  response->set_system_mode(paths_.system_mode);
  response->set_pid(static_cast<uint32_t>(getpid()));
  response->set_os(std::string(contract::OsName(contract::CurrentOs())));
  response->set_metrics_address(metrics_address_);
  SyncLaunchHealth();
  SyncProxyHealth();
  for (const std::string& problem : health_.Problems()) {
    response->add_problems(problem);
  }
  KT_ASSIGN_OR_RETURN(std::vector<store::InstanceRow> rows, store_->ListInstances());
  response->set_instances_total(static_cast<uint32_t>(rows.size()));
  for (const store::InstanceRow& row : rows) {
    (*response->mutable_instances_by_state())[row.state] += 1;
  }
  return absl::OkStatus();
}

void Engine::SyncLaunchHealth() { health_.Set("launch", backend_->Problem()); }

void Engine::SyncProxyHealth() {
  const metering::Admission::Pressure pressure = proxy_->Pressure();
  std::string problem;
  if (pressure.recent) {
    problem =
        absl::StrCat("metering proxy under a connection flood: ", pressure.refused_total,
                     " connections refused over the caps (per agent ", pressure.limits.per_instance,
                     ", total ", pressure.limits.total, ") and ", pressure.resource_errors_total,
                     " accepts failed for lack of descriptors since the daemon started; ",
                     pressure.open, " open now (metering_max_connections in ktesiod.toml)");
  }
  health_.Set("proxy", problem);
}

void Engine::SetLimits(const EngineLimits& limits) {
  const bool new_retention = !(limits.retention == limits_.retention);
  limits_ = limits;
  if (new_retention && thread_.joinable()) {
    ScheduleRetention(std::chrono::seconds(1));  // a new policy applies within a second
  }
  supervisor_.set_default_stop_seconds(limits.stop_timeout_seconds);
}

absl::Status Engine::CheckStreamLimit() const {
  if (events_.size() + logs_.size() >= limits_.max_streams) {
    return contract::MakeError(
        absl::StatusCode::kResourceExhausted, contract::reason::kLimitReached,
        absl::StrCat("the daemon already serves ", limits_.max_streams,
                     " event/log streams (max_streams in ktesiod.toml); end one or raise it"));
  }
  return absl::OkStatus();
}

absl::Status Engine::RegisterAgent(const v1::RegisterAgentRequest& request,
                                   v1::RegisterAgentResponse* response) {
  KT_ASSIGN_OR_RETURN(int64_t count, store_->CountInstances());
  if (static_cast<uint64_t>(count) >= limits_.max_instances) {
    return contract::MakeError(
        absl::StatusCode::kResourceExhausted, contract::reason::kLimitReached,
        absl::StrCat("the daemon already has ", count,
                     " Agent Instances (max_instances in ktesiod.toml); remove one or raise it"));
  }
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Register(request));
  *response->mutable_instance() = View(row);
  FillResourcesOf(row, response->mutable_instance());
  return absl::OkStatus();
}

absl::Status Engine::ListAgents(const v1::ListAgentsRequest& request,
                                v1::ListAgentsResponse* response) {
  KT_ASSIGN_OR_RETURN(contract::Selector selector, contract::Selector::Parse(request.selector()));
  return ListAgentViews(response, !request.skip_resources(), &selector);
}

absl::Status Engine::ListAgentViews(v1::ListAgentsResponse* response, bool resources,
                                    const contract::Selector* selector) {
  KT_ASSIGN_OR_RETURN(std::vector<store::InstanceRow> rows, store_->ListInstances());
  KT_ASSIGN_OR_RETURN(auto labels, store_->AllLabels());
  static const store::Store::Labels kNone;
  for (const store::InstanceRow& row : rows) {
    const auto found = labels.find(row.id);
    const store::Store::Labels& own = found == labels.end() ? kNone : found->second;
    if (selector != nullptr && !selector->Matches(own)) {
      continue;
    }
    v1::AgentInstance* view = response->add_instances();
    *view = View(row, &own);
    if (resources) {
      FillResourcesOf(row, view);
    }
  }
  *response->mutable_totals() = BuildFleetTotals(response->instances());
  return absl::OkStatus();
}

absl::Status Engine::GetAgent(const v1::GetAgentRequest& request, v1::GetAgentResponse* response) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(request.name()));
  *response->mutable_instance() = View(row);
  FillResourcesOf(row, response->mutable_instance());
  return absl::OkStatus();
}

v1::AgentInstance Engine::View(const store::InstanceRow& row,
                               const store::Store::Labels* labels) const {
  v1::AgentInstance view = BuildInstanceView(row);
  if (labels != nullptr) {
    view.mutable_labels()->insert(labels->begin(), labels->end());
  } else if (absl::StatusOr<store::Store::Labels> own = store_->GetLabels(row.id); own.ok()) {
    view.mutable_labels()->insert(own->begin(), own->end());
  }  // an unreadable label table shows no labels: the view is informational
  view.set_proxy_url(ProxyUrl(row.name));
  v1::BudgetView budget;
  bool has_budget = false;
  FillUsageView(*store_, config_, row, view.mutable_usage(), &budget, &has_budget);
  if (has_budget) {
    *view.mutable_budget() = std::move(budget);
  }
  switch (config_.Settings(row).restart.policy) {
    case supervisor::RestartPolicyKind::kNever:
      view.set_restart_policy(v1::RESTART_POLICY_NEVER);
      break;
    case supervisor::RestartPolicyKind::kOnFailure:
      view.set_restart_policy(v1::RESTART_POLICY_ON_FAILURE);
      break;
    case supervisor::RestartPolicyKind::kAlways:
      view.set_restart_policy(v1::RESTART_POLICY_ALWAYS);
      break;
  }
  if (!row.memory_kind.empty()) {
    v1::MemoryBacking* memory = view.mutable_memory();
    const bool filesystem = row.memory_kind == "filesystem";
    memory->set_kind(filesystem ? v1::MEMORY_KIND_FILESYSTEM : v1::MEMORY_KIND_NATIVE);
    memory->set_guarantee(filesystem ? v1::MEMORY_GUARANTEE_MANAGED_DIR_BYTE_DURABLE
                                     : v1::MEMORY_GUARANTEE_HOME_PERSISTENCE_ONLY);
    if (filesystem) {
      memory->set_dir(MemoryDir(row.home));
    }
    memory->set_declared(view.adapter().config().count("memory.dir") != 0);
  }
  return view;
}

absl::Status Engine::LabelAgent(const v1::LabelAgentRequest& request,
                                v1::LabelAgentResponse* response) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(request.name()));
  for (const auto& [key, value] : request.set()) {
    KT_RETURN_IF_ERROR(CheckOperatorLabel(key));
    KT_RETURN_IF_ERROR(contract::ValidateLabelValue(key, value));
  }
  for (const std::string& key : request.remove()) {
    KT_RETURN_IF_ERROR(CheckOperatorLabel(key));
  }
  KT_ASSIGN_OR_RETURN(store::Store::Labels labels, store_->GetLabels(row.id));
  store::Store::Labels next = labels;
  for (const std::string& key : request.remove()) {
    next.erase(key);
  }
  for (const auto& [key, value] : request.set()) {
    next[key] = value;
  }
  response->set_changed(next != labels);
  if (next != labels) {
    KT_RETURN_IF_ERROR(store_->SetLabels(row.id, next));
  }
  *response->mutable_instance() = View(row, &next);
  return absl::OkStatus();
}

absl::Status Engine::SetInstanceLabels(const std::string& name,
                                       const store::Store::Labels& labels) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(name));
  return store_->SetLabels(row.id, labels);
}

absl::Status CheckOperatorLabel(std::string_view key) {
  KT_RETURN_IF_ERROR(contract::ValidateLabelKey(key));
  if (key.starts_with(contract::kReservedLabelPrefix)) {
    return contract::MakeError(absl::StatusCode::kInvalidArgument, contract::reason::kInvalidLabel,
                               absl::StrCat("label '", std::string(key), "': the ",
                                            std::string(contract::kReservedLabelPrefix),
                                            " prefix is reserved for the daemon (fleet files set ",
                                            std::string(contract::kFleetLabel), ")"));
  }
  return absl::OkStatus();
}

absl::Status Engine::Reload(const std::string& name, v1::AgentInstance* instance) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(name));
  *instance = View(row);
  return absl::OkStatus();
}

void Engine::RemoveAgent(const v1::RemoveAgentRequest& request, v1::RemoveAgentResponse* response,
                         Finish finish) {
  absl::StatusOr<store::InstanceRow> row = registry_.Find(request.name());
  if (!row.ok()) {
    finish(row.status());
    return;
  }
  auto remove = [this, request, response, finish]() {
    absl::StatusOr<store::InstanceRow> current = registry_.Find(request.name());
    if (!current.ok()) {
      finish(current.status());
      return;
    }
    const auto state = supervisor::ParseState(current->state);
    if (state.has_value() && supervisor::IsLive(*state)) {
      finish(contract::MakeError(
          absl::StatusCode::kFailedPrecondition, reason::kInvalidState,
          absl::StrCat("cannot remove Agent Instance '", current->name, "' while it is '",
                       current->state, "' (stop it first, or pass --force)")));
      return;
    }
    supervisor_.Forget(current->name);
    if (absl::Status status = registry_.Remove(*current, request.delete_home()); !status.ok()) {
      finish(status);
      return;
    }
    proxy_->Forget(current->name);  // its metrics go with it
    std::erase_if(genai_,
                  [&](const auto& entry) { return std::get<0>(entry.first) == current->name; });
    response->set_name(current->name);
    response->set_agent_home(current->home);
    response->set_home_deleted(request.delete_home());
    finish(absl::OkStatus());
  };
  const auto state = supervisor::ParseState(row->state);
  const bool live = state.has_value() && supervisor::IsLive(*state);
  if (live && request.force() &&
      (*state == supervisor::State::kRunning || *state == supervisor::State::kPaused)) {
    // --force stops first, with a short graceful window so the call stays bounded.
    supervisor_.Stop(request.name(), 5, [remove, finish](absl::Status status, auto) {
      if (!status.ok()) {
        finish(status);
        return;
      }
      remove();
    });
    return;
  }
  remove();
}

namespace {

std::optional<uint32_t> StopWindow(const auto& request) {
  return request.has_timeout_seconds() ? std::optional<uint32_t>(request.timeout_seconds())
                                       : std::nullopt;
}

}  // namespace

template <typename Response>
supervisor::Done Engine::Complete(const std::string& name, Response* response, Finish finish) {
  // Every lifecycle command answers the same way: its notices, then the instance as it is now.
  return [this, name, response, finish = std::move(finish)](absl::Status status,
                                                            std::vector<std::string> notices) {
    for (std::string& notice : notices) {
      response->add_notices(std::move(notice));
    }
    if (status.ok()) {
      status = Reload(name, response->mutable_instance());
    }
    finish(status);
  };
}

void Engine::StartAgent(const v1::StartAgentRequest& request, v1::StartAgentResponse* response,
                        Finish finish) {
  supervisor_.Start(request.name(), Complete(request.name(), response, std::move(finish)));
}

void Engine::StopAgent(const v1::StopAgentRequest& request, v1::StopAgentResponse* response,
                       Finish finish) {
  supervisor_.Stop(request.name(), StopWindow(request),
                   Complete(request.name(), response, std::move(finish)));
}

void Engine::StopAllAgents(const v1::StopAllAgentsRequest& request,
                           v1::StopAllAgentsResponse* response, Finish finish) {
  absl::StatusOr<std::vector<store::InstanceRow>> rows = store_->ListInstances();
  if (!rows.ok()) {
    finish(rows.status());
    return;
  }
  struct Fleet {
    size_t left = 0;
    std::vector<std::string> acted;
    Finish finish;
  };
  auto fleet = std::make_shared<Fleet>();
  fleet->finish = std::move(finish);
  std::vector<std::string> live;
  for (const store::InstanceRow& row : *rows) {
    const supervisor::State state = supervisor::RowState(row);
    if (state == supervisor::State::kRunning || state == supervisor::State::kPaused) {
      live.push_back(row.name);
    } else if (state == supervisor::State::kStarting || state == supervisor::State::kStopping) {
      response->add_notices(absl::StrCat(row.name, ": '", row.state,
                                         "', left to finish that transition; not stopped"));
    } else if (supervisor_.RestartPending(row.name)) {
      live.push_back(row.name);  // Stop cancels the pending restart
    }
  }
  if (live.empty()) {
    fleet->finish(absl::OkStatus());
    return;
  }
  fleet->left = live.size();
  const std::optional<uint32_t> window = StopWindow(request);
  for (const std::string& name : live) {
    supervisor_.Stop(
        name, window,
        [this, fleet, response, name](absl::Status status, std::vector<std::string> notices) {
          for (const std::string& notice : notices) {
            response->add_notices(absl::StrCat(name, ": ", notice));
          }
          if (!status.ok()) {
            response->add_notices(absl::StrCat(name, ": ", status.message()));
          }
          fleet->acted.push_back(name);
          if (--fleet->left > 0) {
            return;
          }
          std::sort(fleet->acted.begin(), fleet->acted.end());
          for (const std::string& acted : fleet->acted) {
            if (absl::Status s = Reload(acted, response->add_instances()); !s.ok()) {
              response->add_notices(absl::StrCat(acted, ": ", s.message()));
            }
          }
          fleet->finish(absl::OkStatus());
        });
  }
}

void Engine::RestartAgent(const v1::RestartAgentRequest& request,
                          v1::RestartAgentResponse* response, Finish finish) {
  supervisor_.Restart(request.name(), StopWindow(request),
                      Complete(request.name(), response, std::move(finish)));
}

void Engine::PauseAgent(const v1::PauseAgentRequest& request, v1::PauseAgentResponse* response,
                        Finish finish) {
  supervisor_.Pause(request.name(), Complete(request.name(), response, std::move(finish)));
}

void Engine::ResumeAgent(const v1::ResumeAgentRequest& request, v1::ResumeAgentResponse* response,
                         Finish finish) {
  supervisor_.Resume(request.name(), Complete(request.name(), response, std::move(finish)));
}

void Engine::SendInput(const v1::SendInputRequest& request, v1::SendInputResponse* response,
                       Finish finish) {
  if (request.text().find('\n') != std::string::npos) {
    finish(contract::MakeError(absl::StatusCode::kInvalidArgument, reason::kInvalidArgument,
                               "send takes one line: the text must not contain a newline"));
    return;
  }
  supervisor_.SendInput(request.name(), request.text(),
                        [response, finish](absl::StatusOr<uint64_t> written) {
                          if (!written.ok()) {
                            finish(written.status());
                            return;
                          }
                          response->set_bytes_written(*written);
                          finish(absl::OkStatus());
                        });
}

}  // namespace ktesio::daemon::engine
