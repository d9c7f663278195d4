#include "logs/reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <deque>

namespace ktesio::daemon::logs {
namespace {

// Reads complete records of one segment from `offset`; advances `offset` past them.
void ReadSegment(const std::string& path, uint64_t* offset, const LogQuery& query,
                 std::vector<LogRecord>* out, std::deque<LogRecord>* tail_window) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return;
  }
  std::string pending;
  char buffer[65536];
  uint64_t consumed = *offset;
  off_t at = static_cast<off_t>(*offset);
  while (true) {
    ssize_t n = pread(fd, buffer, sizeof(buffer), at);
    if (n <= 0) {
      break;
    }
    at += n;
    pending.append(buffer, static_cast<size_t>(n));
    size_t start = 0;
    while (true) {
      size_t nl = pending.find('\n', start);
      if (nl == std::string::npos) {
        break;
      }
      std::optional<LogRecord> record =
          ParseRecord(std::string_view(pending).substr(start, nl - start));
      consumed += nl - start + 1;
      start = nl + 1;
      if (record.has_value() && Matches(query, *record)) {
        if (tail_window != nullptr) {
          tail_window->push_back(std::move(*record));
          if (query.tail > 0 && tail_window->size() > query.tail) {
            tail_window->pop_front();
          }
        } else {
          out->push_back(std::move(*record));
        }
      }
    }
    pending.erase(0, start);
  }
  close(fd);
  *offset = consumed;
}

}  // namespace

bool Matches(const LogQuery& query, const LogRecord& record) {
  return (query.stream.empty() || query.stream == record.stream) &&
         (query.since_ms == 0 || record.at_ms >= query.since_ms);
}

std::vector<LogRecord> ReadRetained(const std::string& log_dir, const LogQuery& query,
                                    Position* end) {
  std::deque<LogRecord> window;
  Position position;
  for (const Segment& segment : ListSegments(log_dir)) {
    position.sequence = segment.sequence;
    position.offset = 0;
    ReadSegment(segment.path, &position.offset, query, nullptr, &window);
  }
  if (end != nullptr) {
    *end = position;
  }
  return std::vector<LogRecord>(std::make_move_iterator(window.begin()),
                                std::make_move_iterator(window.end()));
}

Follower::Follower(boost::asio::io_context& io, std::string log_dir, LogQuery query, Position from,
                   Sink sink)
    : log_dir_(std::move(log_dir)),
      query_(std::move(query)),
      position_(from),
      sink_(std::move(sink)),
      watch_(io, log_dir_, [this] { Drain(); }) {
  query_.tail = 0;
}

void Follower::Drain() {
  std::vector<LogRecord> records;
  for (const Segment& segment : ListSegments(log_dir_)) {
    if (segment.sequence < position_.sequence) {
      continue;
    }
    if (segment.sequence > position_.sequence) {
      position_ = {segment.sequence, 0};
    }
    ReadSegment(segment.path, &position_.offset, query_, &records, nullptr);
  }
  if (!records.empty()) {
    sink_(std::move(records));
  }
}

}  // namespace ktesio::daemon::logs
