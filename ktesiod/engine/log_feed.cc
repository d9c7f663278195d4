#include "engine/log_feed.h"

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/utf8.h"
#include "supervisor/supervisor.h"

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

absl::StatusOr<logs::LogQuery> LogQueryOf(const v1::LogFilter& filter) {
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

void LogFeed::Read(const store::InstanceRow& row, const logs::LogQuery& query,
                   google::protobuf::RepeatedPtrField<v1::LogLine>* lines) {
  AddLines(row.name, logs::ReadRetained(row.home + "/logs", query, nullptr), lines);
}

uint64_t LogFeed::Follow(const store::InstanceRow& row, const logs::LogQuery& query,
                         bool no_retained, Emit emit, End end) {
  const std::string log_dir = row.home + "/logs";
  logs::Position position;
  v1::FollowLogsResponse retained;
  retained.set_retained(true);  // sent first, even empty: live lines follow it
  std::vector<logs::LogRecord> kept = logs::ReadRetained(log_dir, query, &position);
  if (!no_retained) {
    AddLines(row.name, std::move(kept), retained.mutable_lines());
  }
  if (supervisor::RowState(row) != supervisor::State::kRunning) {
    retained.set_end_note(
        absl::StrCat("'", row.name, "' is ", row.state, ", not running: nothing more to follow"));
    emit(std::move(retained));
    end(absl::OkStatus());
    return 0;
  }
  emit(std::move(retained));
  const uint64_t id = next_id_++;
  const std::string name = row.name;
  Following& follow = follows_[id];
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

void LogFeed::Stop(uint64_t id) { follows_.erase(id); }

void LogFeed::EndFollowsOf(const store::InstanceRow& row) {
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
