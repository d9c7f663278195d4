#include "respawn.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "capture.h"

namespace ktesio::daemon::shim {
namespace {

// "KEY VALUE\n" at the front of `text`; consumes it. Returns the value, nullopt on a mismatch.
std::optional<std::string_view> TakeLine(std::string_view& text, std::string_view key) {
  const size_t nl = text.find('\n');
  if (nl == std::string_view::npos) {
    return std::nullopt;
  }
  std::string_view line = text.substr(0, nl);
  text.remove_prefix(nl + 1);
  if (line.size() < key.size() + 1 || line.substr(0, key.size()) != key ||
      line[key.size()] != ' ') {
    return std::nullopt;
  }
  return line.substr(key.size() + 1);
}

std::optional<int64_t> ParseMs(std::optional<std::string_view> text) {
  if (!text.has_value() || text->empty()) {
    return std::nullopt;
  }
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size() || value < -1) {
    return std::nullopt;
  }
  return value;
}

std::optional<std::string> ReadSmallFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return std::nullopt;
  }
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      text.append(buffer, static_cast<size_t>(n));
      if (text.size() <= 64 * 1024) {
        continue;
      }
    } else if (n < 0 && errno == EINTR) {
      continue;
    }
    break;
  }
  close(fd);
  return text;
}

}  // namespace

std::optional<RespawnGrant> ParseRespawnGrant(std::string_view text) {
  RespawnGrant grant;
  std::optional<int64_t> crash = ParseMs(TakeLine(text, "crash_after_ms"));
  std::optional<int64_t> clean = ParseMs(TakeLine(text, "clean_after_ms"));
  std::optional<std::string_view> usage = TakeLine(text, "usage_file");
  if (!crash.has_value() || !clean.has_value() || !usage.has_value() || !text.empty()) {
    return std::nullopt;
  }
  grant.crash_after_ms = *crash;
  grant.clean_after_ms = *clean;
  grant.usage_file = std::string(*usage);
  return grant;
}

bool GrantCovers(const RespawnGrant& grant, int wait_status, int64_t run_ms) {
  const bool clean = WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
  const int64_t after = clean ? grant.clean_after_ms : grant.crash_after_ms;
  return after >= 0 && run_ms >= after;
}

std::optional<RespawnGrant> ReadRespawnGrant(const std::string& run_dir, int wait_status,
                                             int64_t run_ms) {
  std::optional<std::string> text = ReadSmallFile(run_dir + "/" + kRespawnGrantFile);
  if (!text.has_value()) {
    return std::nullopt;
  }
  std::optional<RespawnGrant> grant = ParseRespawnGrant(*text);
  if (!grant.has_value() || !GrantCovers(*grant, wait_status, run_ms)) {
    return std::nullopt;
  }
  return grant;
}

void ConsumeRespawnGrant(const std::string& run_dir) {
  unlink((run_dir + "/" + kRespawnGrantFile).c_str());  // ENOENT: withdrawn meanwhile, fine
}

int64_t ProcStartTime(pid_t pid) {
  std::optional<std::string> text = ReadSmallFile("/proc/" + std::to_string(pid) + "/stat");
  if (!text.has_value()) {
    return 0;
  }
  // Field 22; the fields after the command name's closing parenthesis start at field 3.
  size_t at = text->rfind(')');
  for (int field = 2; at != std::string::npos && field < 22; ++field) {
    at = text->find(' ', at + 1);
  }
  if (at == std::string::npos) {
    return 0;
  }
  int64_t value = 0;
  const char* begin = text->data() + at + 1;
  auto [end, ec] = std::from_chars(begin, text->data() + text->size(), value);
  return ec == std::errc() && end != begin ? value : 0;
}

std::string FormatRespawned(int wait_status, int64_t run_ms, pid_t agent, int64_t start_time,
                            int64_t started_at_ms) {
  return FormatExitRecord(wait_status) + "run_ms " + std::to_string(run_ms) + "\npid " +
         std::to_string(agent) + "\nstart_time " + std::to_string(start_time) + "\nstarted_at_ms " +
         std::to_string(started_at_ms) + "\n";
}

}  // namespace ktesio::daemon::shim
