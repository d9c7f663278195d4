#include "cli/output.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "absl/time/time.h"
#include "ktesio/contract/json_writer.h"

namespace ktesio::cli {

void Out(std::string_view text) {
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = write(STDOUT_FILENO, text.data() + written, text.size() - written);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      // EPIPE (reader went away, e.g. `| head`) and every other stdout failure: the reader
      // has what it wanted; nothing useful can be said on stdout any more.
      std::_Exit(0);
    }
    written += static_cast<size_t>(n);
  }
}

void Err(std::string_view line) {
  std::string text(line);
  text += '\n';
  ssize_t ignored = write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
}

int ReportError(bool json, std::string_view reason, std::string_view message, int exit_code) {
  if (json) {
    contract::JsonWriter w;
    w.BeginObject().Key("schema_version").Int(1).Key("error").BeginObject();
    w.Key("reason").String(reason).Key("message").String(message).EndObject().EndObject();
    Out(w.str() + "\n");
  } else {
    Err(std::string("ktctl: ") + std::string(message));
  }
  return exit_code;
}

std::string FormatTime(int64_t unix_ms) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

}  // namespace ktesio::cli
