#pragma once

// Agent logs as the API serves them, one owner on the engine thread: reads of the retained
// lines and live follows. A follow emits the retained lines, then new ones as the agent writes
// them (woken by inotify, never polling), until the agent leaves running — then what it wrote
// last, an end note and the end — or until Stop.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "boost/asio/io_context.hpp"
#include "ktesio/v1/logs.pb.h"
#include "logs/reader.h"
#include "store/store.h"

namespace ktesio::daemon::engine {

// The query a filter asks for. Errors: INVALID_ARGUMENT for an unknown stream.
absl::StatusOr<logs::LogQuery> LogQueryOf(const v1::LogFilter& filter);

class LogFeed {
 public:
  // `io` outlives the feed (its follows watch directories through it).
  explicit LogFeed(boost::asio::io_context& io) : io_(io) {}
  LogFeed(const LogFeed&) = delete;
  LogFeed& operator=(const LogFeed&) = delete;

  // The retained lines of `row` matching `query`, appended to `lines`.
  static void Read(const store::InstanceRow& row, const logs::LogQuery& query,
                   google::protobuf::RepeatedPtrField<v1::LogLine>* lines);

  using Emit = std::function<void(v1::FollowLogsResponse)>;
  using End = std::function<void(absl::Status)>;
  // Follows `row`'s logs (the retained lines first unless `no_retained`). When the agent is not
  // running the retained lines and an end note are emitted, `end` is called and 0 is returned;
  // otherwise the follow's id for Stop.
  uint64_t Follow(const store::InstanceRow& row, const logs::LogQuery& query, bool no_retained,
                  Emit emit, End end);
  void Stop(uint64_t id);
  // `row` left running: each of its follows emits what the agent wrote last and an end note
  // naming the new state and cause, then ends.
  void EndFollowsOf(const store::InstanceRow& row);
  // Drops every follow without a word (shutdown).
  void Clear() { follows_.clear(); }

  size_t size() const { return follows_.size(); }

 private:
  struct Following {
    std::string instance;
    std::unique_ptr<logs::Follower> follower;
    Emit emit;
    End end;
  };
  boost::asio::io_context& io_;
  std::map<uint64_t, Following> follows_;
  uint64_t next_id_ = 1;
};

}  // namespace ktesio::daemon::engine
