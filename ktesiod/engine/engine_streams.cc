// The engine's streams at the API edge: log reads and follows, event subscriptions and the audit
// trail, translated from their v1 requests to the log and event feeds; and the transition hook
// that keeps the feeds (and the usage watches and proxy listeners) in step with the lifecycle.

#include "engine/engine.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::daemon::engine {

absl::Status Engine::ReadLogs(const v1::ReadLogsRequest& request, v1::ReadLogsResponse* response) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(request.filter().name()));
  KT_ASSIGN_OR_RETURN(logs::LogQuery query, LogQueryOf(request.filter()));
  if (!request.filter().no_retained()) {
    LogFeed::Read(row, query, response->mutable_lines());
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Engine::StartFollow(const v1::LogFilter& filter, Emit emit,
                                             std::function<void(absl::Status)> end) {
  KT_RETURN_IF_ERROR(CheckStreamLimit());
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(filter.name()));
  KT_ASSIGN_OR_RETURN(logs::LogQuery query, LogQueryOf(filter));
  return logs_.Follow(row, query, filter.no_retained(), std::move(emit), std::move(end));
}

void Engine::StopFollow(uint64_t id) { logs_.Stop(id); }

absl::StatusOr<uint64_t> Engine::Subscribe(const v1::SubscribeEventsRequest& request,
                                           EmitEvents emit, EndEvents end) {
  KT_RETURN_IF_ERROR(CheckStreamLimit());
  if (!request.instance().empty()) {
    KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(request.instance()));
  }
  EventFeed::Subscriber subscriber;
  subscriber.instance = request.instance();
  subscriber.log = request.audit() ? store::EventLog::kAudit : store::EventLog::kEvents;
  if (request.has_since_cursor()) {
    subscriber.since_cursor = static_cast<int64_t>(request.since_cursor());
  }
  subscriber.emit = std::move(emit);
  subscriber.end = std::move(end);
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
