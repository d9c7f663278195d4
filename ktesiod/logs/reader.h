#pragma once

// Reading an instance's retained log across its segments, and following it as it grows.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "boost/asio/io_context.hpp"
#include "fs/directory_watch.h"
#include "logs/segments.h"

namespace ktesio::daemon::logs {

struct LogQuery {
  uint32_t tail = 0;     // 0 = every retained record
  int64_t since_ms = 0;  // 0 = no lower bound
  std::string stream;    // "" = all, else agent-out | agent-err | engine
};

bool Matches(const LogQuery& query, const LogRecord& record);

// Where a reader stands: the segment and the byte offset after the last complete record read.
struct Position {
  uint64_t sequence = 0;
  uint64_t offset = 0;
};

// Every retained record matching `query`, oldest first, and the position after the last
// complete record (where a follower continues).
std::vector<LogRecord> ReadRetained(const std::string& log_dir, const LogQuery& query,
                                    Position* end);

// Follows a log directory from a position: wakes on inotify (no polling), reads complete new
// records across rotation, and hands matching ones to `sink`. Engine thread only.
class Follower {
 public:
  using Sink = std::function<void(std::vector<LogRecord>)>;
  Follower(boost::asio::io_context& io, std::string log_dir, LogQuery query, Position from,
           Sink sink);
  // Reads whatever is new right now (also called on every change in the directory).
  void Drain();

 private:
  std::string log_dir_;
  LogQuery query_;
  Position position_;
  Sink sink_;
  fs::DirectoryWatch watch_;
};

}  // namespace ktesio::daemon::logs
