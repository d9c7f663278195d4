#include "capture.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "footprint.h"
#include "ktesio/contract/usage_line.h"

namespace ktesio::daemon::shim {
namespace {

constexpr std::size_t kReadChunk = 64 * 1024;
// Records are flushed at this size even mid-chunk, bounding memory when a chunk holds many tiny
// lines (each record adds ~35 bytes of timestamp and stream name).
constexpr std::size_t kFlushBytes = 256 * 1024;
constexpr int kDrainMs = 2000;
constexpr int kMaxPreKillChunks = 16;  // 16 x 64 KiB = the largest pipe an unprivileged user gets.
// After this long without any event the burst buffers are given back to the kernel, and the
// shim's mappings of its code, so a quiet agent's shim returns to its small idle footprint (see
// ReleaseBuffers).
constexpr int kIdleReleaseMs = 1000;
// How long the records of a read may wait for those of the next reads before they are written:
// a writer making one write(2) per line would otherwise cost the shim a write per line too.
constexpr std::chrono::microseconds kFlushDelay{1000};
// After a read that did not fill the buffer, the shim lets more arrive before it reads again: a
// writer of one write(2) per line then fills the pipe without waking the shim for every line.
constexpr long kCoalesceNs = 200'000;
// After the agent exited, a disk that stays full must not keep the exit record from being written
// for long: the daemon is waiting for it.
constexpr std::chrono::seconds kExitWriteBudget{5};

// Every live (non-zombie) descendant of `root`, found by walking /proc by parent pid.
std::vector<pid_t> LiveDescendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) {
    return {};
  }
  while (dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') {
      continue;
    }
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE* file = std::fopen(path, "r");
    if (file == nullptr) {
      continue;  // it exited meanwhile
    }
    char line[1024];
    const bool read = std::fgets(line, sizeof(line), file) != nullptr;
    std::fclose(file);
    // "pid (comm) state ppid ...": comm may hold anything, so parse after the last ')'.
    const char* close = read ? std::strrchr(line, ')') : nullptr;
    char state = 0;
    long ppid = 0;
    if (close != nullptr && std::sscanf(close + 1, " %c %ld", &state, &ppid) == 2 && state != 'Z' &&
        state != 'X') {
      children.emplace(static_cast<pid_t>(ppid), static_cast<pid_t>(pid));
    }
  }
  closedir(proc);
  std::vector<pid_t> found;
  std::vector<pid_t> frontier = {root};
  while (!frontier.empty()) {
    const pid_t parent = frontier.back();
    frontier.pop_back();
    auto [first, last] = children.equal_range(parent);
    for (auto it = first; it != last; ++it) {
      found.push_back(it->second);
      frontier.push_back(it->second);
    }
  }
  return found;
}

int RemainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

long RemainingNs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<long>(left.count());
}

}  // namespace

Capture::Capture(const CaptureConfig& config)
    : config_(config), give_up_fn_([this] { return GiveUpAtNow(); }) {
  out_.fd = config.out_fd;
  out_.name = "agent-out";
  out_.usage = config.usage_fd >= 0;
  err_.fd = config.err_fd;
  err_.name = "agent-err";
}

Capture::~Capture() {
  CloseStream(&out_);
  CloseStream(&err_);
  Flush();
}

int Capture::Run() {
  while (!agent_exited_) {
    PollOnce(-1);
  }
  // What the agent wrote before dying is already in the pipes; take it before the group kill so
  // that descendants killed mid-write cannot be mistaken for the agent's last words.
  // Bounded by a pipe's maximum capacity: descendants that keep writing must not delay the kill.
  for (Stream* stream : {&out_, &err_}) {
    for (int i = 0; i < kMaxPreKillChunks && ReadChunk(stream) == ReadResult::kData; ++i) {
    }
  }
  Flush();
  // The agent is still an unreaped zombie, so its pid (= its process group id) cannot have been
  // reused: this kill can only reach the agent's own leftovers.
  kill(-config_.agent, SIGKILL);
  int status = 0;
  while (waitpid(config_.agent, &status, 0) < 0 && errno == EINTR) {
  }
  KillStragglers();
  Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(kDrainMs);
  GiveUpAtNow();
  while ((out_.fd >= 0 || err_.fd >= 0) && Clock::now() < deadline) {
    PollOnce(RemainingMs(deadline));
  }
  // A descendant outside the group may still hold a pipe open; stop waiting for it.
  CloseStream(&out_);
  CloseStream(&err_);
  Flush();
  ReapOthers();
  return status;
}

void Capture::PollOnce(int timeout_ms) {
  pollfd fds[3] = {{out_.fd, POLLIN, 0}, {err_.fd, POLLIN, 0}, {config_.signal_fd, POLLIN, 0}};
  bool holding = read_buffer_ != nullptr || log_buffer_.capacity() > kReadChunk;
  int wait_ms = timeout_ms;
  if ((holding || code_mapped_) && (timeout_ms < 0 || timeout_ms > kIdleReleaseMs)) {
    wait_ms = kIdleReleaseMs;
  }
  if (coalesce_) {
    coalesce_ = false;
    // Never past the held records' flush time.
    timespec pause{0, std::min(kCoalesceNs, RemainingNs(flush_at_))};
    if (pause.tv_nsec > 0) {
      nanosleep(&pause, nullptr);
    }
  }
  // -1: forever. Held records wake the loop by their flush time at the latest.
  long wait_ns = wait_ms < 0 ? -1 : wait_ms * 1'000'000L;
  if (flush_at_ != kNever) {
    wait_ns = wait_ns < 0 ? RemainingNs(flush_at_) : std::min(wait_ns, RemainingNs(flush_at_));
  }
  timespec wait{wait_ns / 1'000'000'000, wait_ns % 1'000'000'000};
  timespec* wait_for = wait_ns < 0 ? nullptr : &wait;
  const int n = ppoll(fds, 3, wait_for, nullptr);
  if (n != 0) {
    code_mapped_ = true;
  }
  if (n > 0) {
    if (fds[0].revents != 0) {
      ReadChunk(&out_);
    }
    if (fds[1].revents != 0) {
      ReadChunk(&err_);
    }
    if (fds[2].revents != 0) {
      OnSigchld();
    }
  }
  // Held records go out at their time even while reads keep coming.
  if (flush_at_ != kNever && Clock::now() >= flush_at_) {
    Flush();
    return;
  }
  if (n == 0 && flush_at_ == kNever) {
    if (holding) {
      ReleaseBuffers();
    } else if (code_mapped_) {
      ReleaseIdleMemory(CodeMappings::kRelease);
    }
    code_mapped_ = false;
  }
}

Capture::ReadResult Capture::ReadChunk(Stream* stream) {
  if (stream->fd < 0) {
    return ReadResult::kEof;
  }
  if (read_buffer_ == nullptr) {
    read_buffer_ = std::make_unique<char[]>(kReadChunk);
    // One mapping up front rather than doubling through the heap, whose freed steps would stay
    // resident.
    log_buffer_.reserve(kFlushBytes + kMaxRecordText + 256);
  }
  ssize_t n = read(stream->fd, read_buffer_.get(), kReadChunk);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
    return ReadResult::kEmpty;
  }
  if (n <= 0) {
    CloseStream(stream);
    return ReadResult::kEof;
  }
  std::string_view ts = timestamps_.Now();
  stream->framer.Feed(
      std::string_view(read_buffer_.get(), static_cast<std::size_t>(n)),
      [&](std::string_view text, Piece piece) { AddRecord(*stream, ts, text, piece); });
  DeferFlush();
  // A full buffer means the writer is ahead: read on at once. Less means it writes in small
  // pieces: wait for more (see kCoalesceNs).
  coalesce_ = static_cast<std::size_t>(n) < kReadChunk;
  return ReadResult::kData;
}

void Capture::CloseStream(Stream* stream) {
  if (stream->fd < 0) {
    return;
  }
  close(stream->fd);
  stream->fd = -1;
  std::string_view ts = timestamps_.Now();
  stream->framer.Finish(
      [&](std::string_view text, Piece piece) { AddRecord(*stream, ts, text, piece); });
  Flush();
}

void Capture::AddRecord(const Stream& stream, std::string_view timestamp, std::string_view text,
                        Piece piece) {
  // Only whole lines are usage lines: a piece of an over-long line is not a parseable one. A
  // usage line too long for one record leaves a marker instead, which the daemon reports as a
  // malformed usage line (a diagnostic, never counted).
  if (stream.usage && piece != Piece::kMore && IsUsageLine(text)) {
    usage_buffer_.append(piece == Piece::kWhole ? text : contract::kOverlongUsageLine);
    usage_buffer_.push_back('\n');
  }
  AppendRecord(&log_buffer_, timestamp, stream.name, text);
  if (log_buffer_.size() >= kFlushBytes) {
    Flush();
  }
}

void Capture::DeferFlush() {
  if (flush_at_ == kNever && !(log_buffer_.empty() && usage_buffer_.empty())) {
    flush_at_ = Clock::now() + kFlushDelay;
  }
}

void Capture::Flush() {
  flush_at_ = kNever;
  // Usage lines first: once a record is in the log, its usage line is already durable in the
  // usage file, whichever of the two a reader looks at.
  if (!usage_buffer_.empty()) {
    WriteFully(config_.usage_fd, usage_buffer_, "usage file", give_up_fn_);
    usage_buffer_.clear();
  }
  if (!log_buffer_.empty()) {
    config_.log->Append(log_buffer_, give_up_fn_);
    log_buffer_.clear();
  }
}

void Capture::ReleaseBuffers() {
  Flush();  // never drop held records
  // Allocations this large are mmap'ed (main.cc pins M_MMAP_THRESHOLD), so freeing them really
  // returns the pages instead of leaving them resident in the heap.
  read_buffer_.reset();
  std::string().swap(log_buffer_);
  std::string().swap(usage_buffer_);
  // The smaller ones went back to the heap's top, which free() shrinks only past 128 KiB: give
  // its pages back too, the code the burst ran, and the stack its deeper calls touched.
  ReleaseIdleMemory(CodeMappings::kRelease);
}

void Capture::OnSigchld() {
  signalfd_siginfo info;
  while (read(config_.signal_fd, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
  }
  if (agent_exited_) {
    ReapOthers();
    return;
  }
  // Peek before reaping: the agent is left a zombie until its group has been killed (see Run).
  for (;;) {
    siginfo_t child{};
    if (waitid(P_ALL, 0, &child, WEXITED | WNOHANG | WNOWAIT) != 0 || child.si_pid == 0) {
      return;
    }
    if (child.si_pid == config_.agent) {
      agent_exited_ = true;
      return;
    }
    waitpid(child.si_pid, nullptr, WNOHANG);  // An orphaned descendant (we are a subreaper).
  }
}

Clock::time_point Capture::GiveUpAtNow() {
  if (give_up_at_ == kNever) {
    siginfo_t info{};
    bool exited =
        agent_exited_ || (waitid(P_PID, config_.agent, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                          info.si_pid == config_.agent);
    if (exited) {
      give_up_at_ = Clock::now() + kExitWriteBudget;
    }
  }
  return give_up_at_;
}

void Capture::KillStragglers() {
  // What the agent left outside its process group (setsid, setpgid) survived the group kill.
  // The shim is a subreaper, so every such process is now its child or a descendant of one: kill
  // them all, again while new ones appear (a straggler may fork while being found).
  const pid_t self = getpid();
  for (int pass = 0; pass < 16; ++pass) {
    // The common case costs one syscall: no child at all means no descendant at all (every
    // straggler would have been re-parented to the shim or to one of its descendants).
    siginfo_t info{};
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 && errno == ECHILD) {
      return;
    }
    const std::vector<pid_t> stragglers = LiveDescendants(self);
    if (stragglers.empty()) {
      return;
    }
    for (pid_t pid : stragglers) {
      kill(pid, SIGKILL);
    }
    ReapOthers();
    usleep(2000);  // let killed grandchildren be re-parented to us before the next walk
    ReapOthers();
  }
}

void Capture::ReapOthers() {
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

std::string FormatExitRecord(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    return "signaled " + std::to_string(WTERMSIG(wait_status)) + "\n";
  }
  return "exited " + std::to_string(WEXITSTATUS(wait_status)) + "\n";
}

}  // namespace ktesio::daemon::shim
