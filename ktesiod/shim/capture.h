#pragma once

// The shim's single event loop: reads the agent's stdout and stderr pipes, frames them into
// timestamped records for the segment log (and copies usage lines), and watches SIGCHLD through
// a signalfd. No threads: one poll() over three descriptors.

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "framer.h"
#include "io.h"
#include "segments.h"

namespace ktesio::daemon::shim {

struct CaptureConfig {
  int out_fd = -1;     // Read end of the agent's stdout pipe; owned (closed) by Capture.
  int err_fd = -1;     // Read end of the agent's stderr pipe; owned by Capture.
  int signal_fd = -1;  // signalfd for SIGCHLD (SIGCHLD blocked).
  pid_t agent = -1;
  SegmentLog* log = nullptr;
  int usage_fd = -1;  // -1: no usage file.
};

class Capture {
 public:
  explicit Capture(const CaptureConfig& config);
  ~Capture();
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  // Captures until the agent has exited, kills what is left of its process group, drains the
  // pipes (to EOF or for at most 2 s), and returns the agent's raw wait status.
  int Run();

 private:
  struct Stream {
    int fd = -1;
    std::string_view name;
    bool usage = false;  // Copy usage lines from this stream.
    LineFramer framer;
  };
  enum class ReadResult { kData, kEmpty, kEof };

  ReadResult ReadChunk(Stream* stream);
  void CloseStream(Stream* stream);
  void AddRecord(const Stream& stream, std::string_view timestamp, std::string_view text,
                 Piece piece);
  void Flush();
  // Records of a read wait at most kFlushDelay for the reads that follow, so that a writer of
  // many small writes costs one write(2) per batch, not one per line.
  void DeferFlush();
  // Waits for readable pipes or SIGCHLD for at most `timeout_ms` (-1: forever) and handles them.
  void PollOnce(int timeout_ms);
  void ReleaseBuffers();
  void OnSigchld();
  void ReapOthers();
  // After the agent's exit and its group kill: SIGKILLs every remaining descendant of the shim
  // (processes the agent moved out of its group), so none outlives the agent.
  void KillStragglers();
  // The writers' give-up time: never while the agent runs (backpressure), kExitWriteBudget after
  // it exited, even if that happens while a write is being retried.
  Clock::time_point GiveUpAtNow();

  CaptureConfig config_;
  Stream out_;
  Stream err_;
  std::unique_ptr<char[]> read_buffer_;  // Allocated on demand, released when idle.
  std::string log_buffer_;
  std::string usage_buffer_;
  TimestampFormatter timestamps_;
  bool agent_exited_ = false;  // Exited but deliberately not reaped yet (see OnSigchld).
  Clock::time_point give_up_at_ = kNever;
  // When the records held in log_buffer_ and usage_buffer_ are written; kNever: none held.
  Clock::time_point flush_at_ = kNever;
  // The last read did not fill the buffer: let more arrive before looking again.
  bool coalesce_ = false;
  // Code ran since the last idle release (set-up did): after kIdleReleaseMs without an event, the
  // shim unmaps its code again (ReleaseIdleMemory), so an idle shim maps next to none of it.
  bool code_mapped_ = true;
  GiveUpAt give_up_fn_;  // GiveUpAtNow() for the writers.
};

// The exit record for a wait status: "exited <code>" or "signaled <signo>", with '\n'.
std::string FormatExitRecord(int wait_status);

}  // namespace ktesio::daemon::shim
