// The engine's log operations: reading retained lines and following live ones.

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"
#include "ktesio/contract/utf8.h"

namespace ktesio::daemon::engine {
namespace {

namespace reason = contract::reason;

v1::LogStream StreamOf(const std::string& name) {
  if (name == "agent-out") {
    return v1::LOG_STREAM_AGENT_OUT;
  }
  if (name == "agent-err") {
    return v1::LOG_STREAM_AGENT_ERR;
  }
  return v1::LOG_STREAM_ENGINE;
}

absl::StatusOr<logs::LogQuery> QueryOf(const v1::LogFilter& filter) {
  logs::LogQuery query;
  query.tail = filter.tail();
  query.since_ms = filter.since_unix_ms();
  switch (filter.stream()) {
    case v1::LOG_STREAM_UNSPECIFIED:
      break;
    case v1::LOG_STREAM_AGENT_OUT:
      query.stream = "agent-out";
      break;
    case v1::LOG_STREAM_AGENT_ERR:
      query.stream = "agent-err";
      break;
    case v1::LOG_STREAM_ENGINE:
      query.stream = "engine";
      break;
    default:
      return contract::MakeError(absl::StatusCode::kInvalidArgument, reason::kInvalidArgument,
                                 "unknown log stream");
  }
  return query;
}

void AddLines(const std::string& instance, std::vector<logs::LogRecord> records,
              google::protobuf::RepeatedPtrField<v1::LogLine>* lines) {
  for (logs::LogRecord& record : records) {
    v1::LogLine* line = lines->Add();
    line->set_instance(instance);
    line->set_stream(StreamOf(record.stream));
    line->set_at_unix_ms(record.at_ms);
    // Agents write bytes, not text: protobuf string fields must be UTF-8 (they refuse to
    // serialize otherwise), so invalid bytes become U+FFFD here. The log file keeps the raw bytes.
    if (contract::IsValidUtf8(record.text)) {
      line->set_text(std::move(record.text));
    } else {
      line->set_text(contract::ToValidUtf8(record.text));
    }
  }
}

}  // namespace

absl::Status Engine::ReadLogs(const v1::ReadLogsRequest& request, v1::ReadLogsResponse* response) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(request.filter().name()));
  KT_ASSIGN_OR_RETURN(logs::LogQuery query, QueryOf(request.filter()));
  if (request.filter().no_retained()) {
    return absl::OkStatus();
  }
  AddLines(row.name, logs::ReadRetained(row.home + "/logs", query, nullptr),
           response->mutable_lines());
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Engine::StartFollow(const v1::LogFilter& filter, Emit emit,
                                             std::function<void(absl::Status)> end) {
  KT_RETURN_IF_ERROR(CheckStreamLimit());
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(filter.name()));
  KT_ASSIGN_OR_RETURN(logs::LogQuery query, QueryOf(filter));
  const std::string log_dir = row.home + "/logs";
  logs::Position position;
  v1::FollowLogsResponse retained;
  std::vector<logs::LogRecord> kept = logs::ReadRetained(log_dir, query, &position);
  if (!filter.no_retained()) {
    AddLines(row.name, std::move(kept), retained.mutable_lines());
  }
  if (supervisor::RowState(row) != supervisor::State::kRunning) {
    retained.set_end_note(
        absl::StrCat("'", row.name, "' is ", row.state, ", not running: nothing more to follow"));
    emit(std::move(retained));
    end(absl::OkStatus());
    return 0;
  }
  if (!retained.lines().empty()) {
    emit(std::move(retained));
  }
  const uint64_t id = next_follow_++;
  const std::string name = row.name;
  Follow& follow = follows_[id];
  follow.instance = name;
  follow.emit = emit;
  follow.end = std::move(end);
  follow.follower = std::make_unique<logs::Follower>(
      io_, log_dir, query, position, [emit, name](std::vector<logs::LogRecord> records) {
        v1::FollowLogsResponse batch;
        AddLines(name, std::move(records), batch.mutable_lines());
        emit(std::move(batch));
      });
  return id;
}

void Engine::StopFollow(uint64_t id) { follows_.erase(id); }

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
    WatchUsage(row);
  } else if (to == supervisor::State::kStopped || to == supervisor::State::kFailed) {
    // The run is over: take its last usage lines, then stop watching.
    IngestUsage(row.name, row.current_run);
    usage_watches_.erase(row.name);
    proxy_->Close(row.name);  // engine-observed: the listener lives while the agent does
  }
  PublishEvents();
  if (to == supervisor::State::kRunning) {
    return;
  }
  for (auto it = follows_.begin(); it != follows_.end();) {
    if (it->second.instance != row.name) {
      ++it;
      continue;
    }
    // Flush what the agent wrote up to now, then end with a note.
    it->second.follower->Drain();
    v1::FollowLogsResponse last;
    last.set_end_note(
        absl::StrCat("'", row.name, "' left running (now ", row.state, ": ", row.cause, ")"));
    it->second.emit(std::move(last));
    it->second.end(absl::OkStatus());
    it = follows_.erase(it);
  }
}

}  // namespace ktesio::daemon::engine
