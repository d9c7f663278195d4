#include "shim.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "capture.h"
#include "footprint.h"
#include "io.h"
#include "pid_record.h"
#include "respawn.h"
#include "segments.h"
#include "spawn.h"

namespace ktesio::daemon::shim {
namespace {

constexpr const char* kStdinFifo = "stdin";
constexpr const char* kExitFile = "exit";

// Descriptors the shim sets up before the fork. The child-side ones are closed after it.
struct Plumbing {
  int stdin_keep = -1;  // O_RDWR on the FIFO, held for the shim's life (see SetUpStdin).
  AgentStdio child;     // The agent's ends.
  int out_read = -1;
  int err_read = -1;
  int signal_fd = -1;
  int usage_fd = -1;
};

// The daemon never signals the shim; a stray terminal or broken-pipe signal must not end it.
// SIGCHLD is blocked and read through a signalfd instead.
int SetUpSignals(std::string* error) {
  for (int sig : {SIGINT, SIGHUP, SIGPIPE, SIGTERM}) {
    signal(sig, SIG_IGN);
  }
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  int fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) {
    *error = ErrnoMessage("signalfd", errno);
  }
  return fd;
}

// With a FIFO, the shim's own O_RDWR open means the agent never sees EOF when a writer (any
// daemon incarnation) goes away, and a writer opening O_WRONLY|O_NONBLOCK always finds a reader.
bool SetUpStdin(const Options& o, Plumbing* p, std::string* error) {
  if (!o.stdin_fifo) {
    p->child.in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (p->child.in < 0) {
      *error = ErrnoMessage("open /dev/null", errno);
    }
    return p->child.in >= 0;
  }
  std::string path = o.run_dir + "/" + kStdinFifo;
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    *error = ErrnoMessage("unlink " + path, errno);
    return false;
  }
  if (mkfifo(path.c_str(), 0600) != 0) {
    *error = ErrnoMessage("mkfifo " + path, errno);
    return false;
  }
  p->stdin_keep = open(path.c_str(), O_RDWR | O_CLOEXEC);
  // Opened after the O_RDWR end exists, so this O_RDONLY open does not block.
  p->child.in = p->stdin_keep < 0 ? -1 : open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (p->child.in < 0) {
    *error = ErrnoMessage("open " + path, errno);
    return false;
  }
  return true;
}

bool MakePipe(int* read_end, int* write_end, std::string* error) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    *error = ErrnoMessage("pipe2", errno);
    return false;
  }
  // Only the shim's end is non-blocking: the agent must block (backpressure), never see EAGAIN.
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  *read_end = fds[0];
  *write_end = fds[1];
  return true;
}

bool SetUpPlumbing(const Options& o, Plumbing* p, std::string* error) {
  if (!o.usage_file.empty()) {
    p->usage_fd = open(o.usage_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (p->usage_fd < 0) {
      *error = ErrnoMessage("open " + o.usage_file, errno);
      return false;
    }
  }
  return SetUpStdin(o, p, error) && MakePipe(&p->out_read, &p->child.out, error) &&
         MakePipe(&p->err_read, &p->child.err, error) && (p->signal_fd = SetUpSignals(error)) >= 0;
}

void CloseChildEnds(Plumbing* p) {
  for (int* fd : {&p->child.in, &p->child.out, &p->child.err}) {
    if (*fd >= 0) {
      close(*fd);
      *fd = -1;
    }
  }
}

// The descriptors of a relaunched agent: a fresh stdin open (the FIFO itself and the shim's
// O_RDWR hold on it stay) and fresh output pipes.
bool SetUpRelaunch(const Options& o, Plumbing* p, std::string* error) {
  const std::string in = o.stdin_fifo ? o.run_dir + "/" + kStdinFifo : "/dev/null";
  p->child.in = open(in.c_str(), O_RDONLY | O_CLOEXEC);
  if (p->child.in < 0) {
    *error = ErrnoMessage("open " + in, errno);
    return false;
  }
  return MakePipe(&p->out_read, &p->child.out, error) &&
         MakePipe(&p->err_read, &p->child.err, error);
}

// The relaunched run's usage copy, named by the grant; opened after the fork (the agent's
// output waits in its pipe until the capture loop runs).
bool SwitchUsageFile(const RespawnGrant& grant, Plumbing* p, std::string* error) {
  if (p->usage_fd >= 0) {
    close(p->usage_fd);
    p->usage_fd = -1;
  }
  if (grant.usage_file.empty()) {
    return true;
  }
  p->usage_fd = open(grant.usage_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (p->usage_fd < 0) {
    *error = ErrnoMessage("open " + grant.usage_file, errno);
    return false;
  }
  return true;
}

// Writes the one handshake line. False only when nobody can read it any more (EPIPE): the
// daemon that launched the shim died before it learned what the line says.
bool Handshake(const Options& o, const std::string& line) {
  if (o.ready_fd < 0) {
    return true;
  }
  const bool written = WriteOnce(o.ready_fd, line);
  const bool reader_gone = !written && errno == EPIPE;
  close(o.ready_fd);
  return !reader_gone;
}

int SetupFailed(const Options& o, const std::string& error) {
  Report(error);
  Handshake(o, "shim-error " + error + "\n");
  return kExitSetupFailed;
}

bool WriteExitRecord(const Options& o, const std::string& record) {
  std::string error;
  // Atomic, not durable: the daemon reads it from the page cache within milliseconds, and an fsync
  // here sat on the crash -> restart path. After a host crash the boot id, not this record,
  // decides (every agent of the previous boot is `lost`).
  if (!WriteFileAtomic(o.run_dir, kExitFile, record, /*durable=*/false, &error)) {
    Report(error);
    return false;
  }
  return true;
}

bool WritePid(const Options& o, const char* file, pid_t pid, std::string* error) {
  const std::string path = o.run_dir + "/" + file;
  if (const int err = WritePidRecord(path, pid); err != 0) {
    *error = ErrnoMessage("write " + path, err);
    return false;
  }
  return true;
}

}  // namespace

int RunShim(const Options& o) {
  if (o.ready_fd >= 0) {
    fcntl(o.ready_fd, F_SETFD, FD_CLOEXEC);
  }
  // Orphaned descendants of the agent are re-parented to the shim rather than to init, so the
  // shim reaps them and none of them escapes its supervision as someone else's zombie.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  std::string error;
  // A run directory may be reused by a restart: a stale exit record or agent pid would describe
  // the previous run. (The pid records are rewritten in place, never unlinked: pid_record.h.)
  for (const char* stale : {kExitFile, kRespawnGrantFile, kRespawnedFile}) {
    unlink((o.run_dir + "/" + stale).c_str());
  }
  // (When even that fails, writing the agent's pid below reports it.)
  ClearPidRecord(o.run_dir + "/" + kAgentPidFile);
  if (!WritePid(o, kShimPidFile, getpid(), &error)) {
    return SetupFailed(o, error);
  }
  SegmentLog log(o.log_dir, o.max_bytes, o.keep);
  Plumbing p;
  if (!log.Open(&error) || !SetUpPlumbing(o, &p, &error)) {
    return SetupFailed(o, error);
  }
  SpawnResult spawn = SpawnAgent(o.command, o.cwd, p.child);
  CloseChildEnds(&p);
  if (spawn.error != 0) {
    Handshake(
        o, "exec-failed " + std::to_string(spawn.error) + " " + std::strerror(spawn.error) + "\n");
    WriteExitRecord(o, "exec-failed " + std::to_string(spawn.error) + "\n");
    return 0;
  }
  if (!WritePid(o, kAgentPidFile, spawn.pid, &error)) {
    Report(error);  // The handshake still names the pid; keep supervising the running agent.
  }
  if (!Handshake(o,
                 "started " + std::to_string(spawn.pid) + " " + std::to_string(getpid()) + "\n")) {
    // The daemon commits an agent's spawn record only once it has read this line, so no daemon
    // will ever know of (or re-adopt) this agent: it must not run on unsupervised. Its exit is
    // captured and recorded as any other.
    Report("the launching ktesiod is gone before the handshake; the unsupervised agent is killed");
    kill(-spawn.pid, SIGKILL);
  }

  CaptureConfig config;
  config.signal_fd = p.signal_fd;
  config.log = &log;
  for (;;) {
    // Set-up (or the previous run's end) is over: the heap's top still holds pages transient
    // buffers touched (opendir's 32 KiB, listing the log segments or /proc for stragglers), which
    // free() gives back only past 128 KiB, and set-up's calls ran deeper into the stack than the
    // capture loop will.
    // (Its code waits for the capture loop's first quiet second: ReleaseCode reads the page
    // table, work a start of many agents at once should not add to.)
    ReleaseIdleMemory(CodeMappings::kKeep);
    config.out_fd = p.out_read;
    config.err_fd = p.err_read;
    config.agent = spawn.pid;
    config.usage_fd = p.usage_fd;
    const auto started = std::chrono::steady_clock::now();
    const int status = Capture(config).Run();
    const int64_t run_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - started)
                               .count();
    std::optional<RespawnGrant> grant = ReadRespawnGrant(o.run_dir, status, run_ms);
    if (!grant.has_value()) {
      WriteExitRecord(o, FormatExitRecord(status));
      return 0;
    }
    // The daemon's restart, done here: when the relaunch cannot even begin, the exit is recorded
    // as if no grant had been given, and the daemon restarts the agent its own way (and reports
    // what fails then).
    if (!SetUpRelaunch(o, &p, &error)) {
      Report(error);
      CloseChildEnds(&p);
      WriteExitRecord(o, FormatExitRecord(status));
      return 0;
    }
    const int64_t started_at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count();
    spawn = SpawnAgent(o.command, o.cwd, p.child);
    CloseChildEnds(&p);
    if (spawn.error != 0) {
      Report(ErrnoMessage("relaunch", spawn.error));
      WriteExitRecord(o, FormatExitRecord(status));
      return 0;
    }
    ConsumeRespawnGrant(o.run_dir);
    if (!SwitchUsageFile(*grant, &p, &error) || !WritePid(o, kAgentPidFile, spawn.pid, &error) ||
        !WriteFileAtomic(
            o.run_dir, kRespawnedFile,
            FormatRespawned(status, run_ms, spawn.pid, ProcStartTime(spawn.pid), started_at_ms),
            false, &error)) {
      // Without its usage copy or the record, the relaunched run cannot be accounted for: it
      // does not run on, and its exit is recorded as any other.
      Report(error);
      kill(-spawn.pid, SIGKILL);
    }
  }
}

}  // namespace ktesio::daemon::shim
