// The engine's streams: log reads and follows, event subscriptions and the audit trail, checked
// against the stream limit and handed to the log and event feeds; and the transition hook that
// keeps the feeds (and the usage watches and proxy listeners) in step with the lifecycle.

#include "engine/engine.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::daemon::engine {

absl::Status Engine::ReadLogs(const std::string& name, const logs::LogQuery& query,
                              google::protobuf::RepeatedPtrField<v1::LogLine>* lines) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(name));
  LogFeed::Read(row, query, lines);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Engine::StartFollow(const std::string& name, const logs::LogQuery& query,
                                             bool no_retained, Emit emit,
                                             std::function<void(absl::Status)> end) {
  KT_RETURN_IF_ERROR(CheckStreamLimit());
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(name));
  return logs_.Follow(row, query, no_retained, std::move(emit), std::move(end));
}

void Engine::StopFollow(uint64_t id) { logs_.Stop(id); }

absl::StatusOr<uint64_t> Engine::Subscribe(EventFeed::Subscriber subscriber) {
  KT_RETURN_IF_ERROR(CheckStreamLimit());
  if (!subscriber.instance.empty()) {
    KT_RETURN_IF_ERROR(registry_.Find(subscriber.instance).status());
  }
  return events_.Subscribe(std::move(subscriber));
}

void Engine::Unsubscribe(uint64_t id) { events_.Unsubscribe(id); }

void Engine::Audit(uint32_t uid, std::string_view rpc, const std::string& instance,
                   const absl::Status& outcome) {
  events_.Audit(uid, rpc, instance, outcome);
}

void Engine::OnTransition(const store::InstanceRow& row, supervisor::State from,
                          supervisor::State to) {
  SyncLaunchHealth();  // a launch may have found (or lost) the shim
  if (from == supervisor::State::kPaused && to == supervisor::State::kRunning) {
    proxy_->Unblock(row.name);  // resumed by the operator: calls may go through again
  }
  if (to == supervisor::State::kPaused || to == supervisor::State::kStopping ||
      to == supervisor::State::kStopped || to == supervisor::State::kFailed) {
    // The run left running: a pending budget action is done (or moot).
    if (absl::Status status = store_->ClearPendingBreaches(row.id, row.current_run); !status.ok()) {
      // Left pending: the next start finds the run not running and clears it then.
      log_->warn("pending budget breach of {} not cleared: {}", row.name,
                 std::string(status.message()));
    }
  }
  if ((to == supervisor::State::kStarting || !supervisor::IsLive(to)) &&
      unopened_proxies_.erase(row.name) > 0) {
    ReportUnopenedProxies();  // started again (a new listener) or ended: no longer a problem
  }
  if (to == supervisor::State::kStarting) {
    usage_.Watch(row);
  } else if (to == supervisor::State::kStopped || to == supervisor::State::kFailed) {
    usage_.RunEnded(row);     // its last usage lines, then no more watching
    proxy_->Close(row.name);  // engine-observed: the listener lives while the agent does
  }
  events_.Publish();
  if (to != supervisor::State::kRunning) {
    logs_.EndFollowsOf(row);
  }
}

}  // namespace ktesio::daemon::engine
