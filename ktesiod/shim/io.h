#pragma once

// Small POSIX helpers shared by the shim's parts: writes that apply backpressure instead of
// dropping data, atomic file replacement, and messages on stderr.

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

namespace ktesio::daemon::shim {

using Clock = std::chrono::steady_clock;
inline constexpr Clock::time_point kNever = Clock::time_point::max();

// When a failing write gives up. Asked again before every retry, so the caller can shorten it
// when circumstances change (the agent exited while the disk was full).
using GiveUpAt = std::function<Clock::time_point()>;
inline GiveUpAt Never() {
  return [] { return kNever; };
}

// Writes all of `data` to `fd`. On a failure (ENOSPC, EIO, ...) it reports once on stderr and
// retries with a short backoff: while it waits the shim reads nothing, so the agent blocks on its
// full pipe instead of losing output. Returns false only when the time from `give_up_at` passes
// first.
bool WriteFully(int fd, std::string_view data, std::string_view what, const GiveUpAt& give_up_at);

// One attempt to write all of `data` (pipes to the daemon); false on any error.
bool WriteOnce(int fd, std::string_view data);

// Replaces dir/name with `content` via dir/name.tmp + rename. With `durable`, the file and the
// directory are fsync'ed so the result survives a power loss.
bool WriteFileAtomic(const std::string& dir, const std::string& name, std::string_view content,
                     bool durable, std::string* error);

// Sleeps for `ms` milliseconds (retry backoff).
void SleepMs(int ms);

// "ktesio-shim: <message>\n" on stderr.
void Report(std::string_view message);

// "<what>: <strerror(err)>".
std::string ErrnoMessage(std::string_view what, int err);

}  // namespace ktesio::daemon::shim
