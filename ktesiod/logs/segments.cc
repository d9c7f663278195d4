#include "logs/segments.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "ktesio/contract/error.h"

namespace ktesio::daemon::logs {

std::vector<Segment> ListSegments(const std::string& log_dir) {
  std::vector<Segment> segments;
  DIR* dir = opendir(log_dir.c_str());
  if (dir == nullptr) {
    return segments;
  }
  while (dirent* entry = readdir(dir)) {
    std::string_view name = entry->d_name;
    if (name.size() != 19 || name.substr(0, 7) != "output-" || name.substr(15) != ".log") {
      continue;
    }
    uint64_t sequence = 0;
    if (absl::SimpleAtoi(std::string(name.substr(7, 8)), &sequence)) {
      segments.push_back({sequence, absl::StrCat(log_dir, "/", std::string(name))});
    }
  }
  closedir(dir);
  std::sort(segments.begin(), segments.end(),
            [](const Segment& a, const Segment& b) { return a.sequence < b.sequence; });
  return segments;
}

std::string SegmentName(uint64_t sequence) { return absl::StrFormat("output-%08d.log", sequence); }

std::string FormatLogTime(int64_t unix_ms) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

std::optional<int64_t> ParseLogTime(std::string_view text) {
  absl::Time time;
  std::string error;
  if (!absl::ParseTime("%Y-%m-%dT%H:%M:%E*SZ", std::string(text), absl::UTCTimeZone(), &time,
                       &error) &&
      !absl::ParseTime(absl::RFC3339_full, std::string(text), &time, &error)) {
    return std::nullopt;
  }
  return absl::ToUnixMillis(time);
}

std::optional<LogRecord> ParseRecord(std::string_view line) {
  size_t first = line.find(' ');
  if (first == std::string_view::npos) {
    return std::nullopt;
  }
  size_t second = line.find(' ', first + 1);
  std::string_view stream = line.substr(
      first + 1, second == std::string_view::npos ? std::string_view::npos : second - first - 1);
  if (stream != "agent-out" && stream != "agent-err" && stream != "engine") {
    return std::nullopt;
  }
  std::optional<int64_t> at = ParseLogTime(line.substr(0, first));
  if (!at.has_value()) {
    return std::nullopt;
  }
  LogRecord record;
  record.at_ms = *at;
  record.stream = std::string(stream);
  if (second != std::string_view::npos) {
    record.text = std::string(line.substr(second + 1));
  }
  return record;
}

absl::Status AppendEngineLine(const std::string& log_dir, int64_t unix_ms, std::string_view text) {
  std::vector<Segment> segments = ListSegments(log_dir);
  std::string path =
      segments.empty() ? absl::StrCat(log_dir, "/", SegmentName(1)) : segments.back().path;
  std::string record = absl::StrCat(FormatLogTime(unix_ms), " engine ", std::string(text), "\n");
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    return contract::MakeError(absl::StatusCode::kInternal, contract::reason::kIoError,
                               absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  // One write(2) with O_APPEND: the record lands whole, never interleaved with the shim's.
  ssize_t n = write(fd, record.data(), record.size());
  int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(record.size())) {
    return contract::MakeError(absl::StatusCode::kInternal, contract::reason::kIoError,
                               absl::StrCat("cannot append to ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace ktesio::daemon::logs
