#pragma once

// The effectful adapters of `ktctl top`: the terminal in raw mode, signals through a self-pipe,
// and the event stream on a thread of its own. POSIX only, like the rest of ktctl.

#include <termios.h>

#include <array>
#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cli/client.h"

namespace ktesio::cli::top {

// A non-blocking self-pipe that SIGINT, SIGTERM, SIGHUP and SIGWINCH write their number to (the
// handlers do nothing else), so the loop handles signals synchronously. Byte 0 is reserved for
// other threads to wake the loop (WakeByte). At most one WakePipe exists at a time; the
// destructor puts the previous handlers back.
class WakePipe {
 public:
  static constexpr unsigned char kWakeByte = 0;
  // Errors: INTERNAL when the pipe cannot be created.
  static absl::StatusOr<std::unique_ptr<WakePipe>> Install();
  ~WakePipe();
  WakePipe(const WakePipe&) = delete;
  WakePipe& operator=(const WakePipe&) = delete;

  int read_fd() const { return fds_[0]; }
  int write_fd() const { return fds_[1]; }
  // Every byte written since the last call (signal numbers and wake bytes).
  std::string Drain();

 private:
  WakePipe() = default;
  static constexpr std::array<int, 4> kSignals = {SIGINT, SIGTERM, SIGHUP, SIGWINCH};
  int fds_[2] = {-1, -1};
  std::array<struct sigaction, 4> saved_{};
};

// stdin/stdout as a full-screen terminal: raw mode (no echo, no line editing, Ctrl-C as a key),
// the alternate screen, a hidden cursor and no autowrap. Restore() (or the destructor) puts the
// saved termios and the normal screen back; it is idempotent.
class Terminal {
 public:
  // Errors: INTERNAL when stdin's termios cannot be read or set.
  static absl::StatusOr<std::unique_ptr<Terminal>> Enter();
  ~Terminal() { Restore(); }
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;

  void Restore();
  // Writes all of `text` to stdout (gives up silently when the terminal is gone).
  void Write(std::string_view text);
  // Columns and rows; 80×24 when the size cannot be read.
  std::pair<size_t, size_t> Size() const;

 private:
  Terminal() = default;
  termios saved_{};
  bool active_ = false;
};

// SubscribeEvents on a background thread. Each response queues its events and writes a wake
// byte to `wake_fd`; the owner takes the queue with Take(). Thread-safe: Take() may run while
// the thread reads; Start()/Stop() belong to the owner's thread.
class EventFeed {
 public:
  struct Batch {
    std::vector<v1::Event> events;
    bool ended = false;   // the stream finished (status says why)
    bool lagged = false;  // the daemon dropped us for falling behind
    grpc::Status status;
  };
  EventFeed(Client& client, int wake_fd) : client_(client), wake_fd_(wake_fd) {}
  ~EventFeed() { Stop(); }
  EventFeed(const EventFeed&) = delete;
  EventFeed& operator=(const EventFeed&) = delete;

  // Subscribes from `since_cursor`; unset = live events only (events.proto).
  void Start(std::optional<uint64_t> since_cursor);
  // Cancels the stream and joins the thread; drops anything not yet taken.
  void Stop();
  Batch Take();

 private:
  void Run(const v1::SubscribeEventsRequest& request);
  void Wake();

  Client& client_;
  int wake_fd_ = -1;
  std::unique_ptr<grpc::ClientContext> call_;
  std::thread thread_;
  absl::Mutex mu_;
  Batch pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ktesio::cli::top
