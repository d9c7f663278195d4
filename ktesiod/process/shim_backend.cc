#include "process/shim_backend.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pthread.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <sstream>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "boost/asio/post.hpp"
#include "boost/asio/read_until.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/streambuf.hpp"
#include "fs/directory_watch.h"
#include "fs/fs.h"
#include "ktesio/contract/error.h"
#include "process/shim_launcher.h"
#include "process/spawn_attributes.h"
#include "shim/pid_record.h"
#include "spdlog/spdlog.h"

namespace ktesio::daemon::process {
namespace {

// The largest exit or relaunch record read from a run dir (they are a line or two).
constexpr size_t kMaxRecordBytes = 64 * 1024;

namespace reason = contract::reason;
namespace asio = boost::asio;

absl::Status LaunchError(absl::StatusCode code, std::string_view message) {
  return contract::MakeError(code, reason::kLaunchFailed, message);
}

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

// Everything a spawn needs as C arrays, kept alive for the call.
struct CArgs {
  explicit CArgs(std::vector<std::string> values) : storage(std::move(values)) {
    for (std::string& value : storage) {
      pointers.push_back(value.data());
    }
    pointers.push_back(nullptr);
  }
  std::vector<std::string> storage;
  std::vector<char*> pointers;
};

// The shim's command line for `spec`: where it keeps the run and the logs, the handshake on fd 3,
// then `--` and the agent's own command.
std::vector<std::string> ShimArgv(const LaunchSpec& spec, const std::string& shim_path) {
  std::vector<std::string> argv = {shim_path,
                                   "--run-dir",
                                   spec.run_dir,
                                   "--log-dir",
                                   spec.log_dir,
                                   "--cwd",
                                   spec.cwd,
                                   "--max-bytes",
                                   std::to_string(spec.log_max_bytes),
                                   "--keep",
                                   std::to_string(spec.log_keep),
                                   "--ready-fd",
                                   "3"};
  if (spec.stdin_pipe) {
    argv.push_back("--stdin-fifo");
  }
  if (!spec.usage_file.empty()) {
    argv.push_back("--usage-file");
    argv.push_back(spec.usage_file);
  }
  argv.push_back("--");
  argv.push_back(spec.exec);
  argv.insert(argv.end(), spec.args.begin(), spec.args.end());
  return argv;
}

// Spawns the shim in a new session: stdin and stdout /dev/null, stderr its own log, the
// handshake pipe's write end as fd 3 and nothing else. Closes `ready_write` in the parent.
// Returns posix_spawn's error number (0: spawned, `*pid` set).
int SpawnShim(std::vector<std::string> argv, std::vector<std::string> env,
              const std::string& shim_path, const std::string& shim_log, int ready_write,
              pid_t* pid) {
  CArgs c_argv(std::move(argv));
  CArgs c_env(std::move(env));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, shim_log.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0600);
  posix_spawn_file_actions_adddup2(&actions, ready_write, 3);
  posix_spawn_file_actions_addclosefrom_np(&actions, 4);
  posix_spawnattr_t attr;
  InitDetachedSpawnAttributes(&attr);
  const int rc = posix_spawn(pid, shim_path.c_str(), &actions, &attr, c_argv.pointers.data(),
                             c_env.pointers.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(ready_write);
  return rc;
}

}  // namespace

struct ShimBackend::Watch {
  explicit Watch(asio::io_context& io) : descriptor(io) {}
  asio::posix::stream_descriptor descriptor;
  pid_t pid = 0;
  std::unique_ptr<fs::DirectoryWatch> respawns;  // the run dir, for relaunch records
};

ShimBackend::ShimBackend(asio::io_context& io, std::function<ShimSearch()> locate, ShimStart start,
                         std::shared_ptr<spdlog::logger> log)
    : io_(io),
      locate_(std::move(locate)),
      search_(locate_()),
      start_(start),
      log_(log != nullptr ? std::move(log) : spdlog::default_logger()) {}

// A spawn waits: posix_spawn suspends the calling thread until the child has exec'd (CLONE_VFORK,
// most of a millisecond per shim on a VM, spent in the kernel), and the launcher answers once it
// has forked. One thread does the spawns, in order, so that the owner thread prepares the next
// start meanwhile: a boot's autostarts and a `start --all` overlap their store writes and config
// delivery with the spawns before them. The thread owns the shim launcher.
class ShimBackend::Spawner {
 public:
  using Job = std::function<void(ShimLauncher* launcher)>;
  Spawner(ShimStart start, std::shared_ptr<spdlog::logger> log)
      : launcher_(start == ShimStart::kLauncher ? std::make_unique<ShimLauncher>(std::move(log))
                                                : nullptr),
        thread_([this] { Run(); }) {}
  Spawner(const Spawner&) = delete;
  Spawner& operator=(const Spawner&) = delete;
  // Spawns what is queued, then ends: a queued launch is never dropped (its pipe would leak and
  // its caller wait for nothing).
  ~Spawner() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
  }

  void Submit(Job job) {
    absl::MutexLock lock(&mu_);
    jobs_.push_back(std::move(job));
  }

 private:
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !jobs_.empty(); }

  void Run() {
    pthread_setname_np(pthread_self(), "kt-spawn");
    for (;;) {
      Job job;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &Spawner::Ready));
        if (jobs_.empty()) {
          break;
        }
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job(launcher_.get());
    }
    launcher_.reset();  // here, not on the thread that destroys the spawner: it waits for the end
  }

  std::unique_ptr<ShimLauncher> launcher_;  // used on the thread only
  absl::Mutex mu_;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: it starts running once the members above exist
};

ShimBackend::~ShimBackend() {
  // Nothing would enforce a running template's limit after this (a daemon shutting down, a
  // kit's private daemon): it goes with its group now rather than hang on for good. Its pid is
  // still unreaped (its exit watch reaps it), so the group's id cannot have been reused.
  for (const auto& [pid, exec] : templates_) {
    ::kill(-pid, SIGKILL);
    log_->warn("template killed with its process group at shutdown exec={} pid={}", exec, pid);
  }
}

void ShimBackend::Launch(const LaunchSpec& spec,
                         std::function<void(absl::StatusOr<Launched>)> done) {
  if (search_.path.empty()) {
    search_ = locate_();
  }
  if (search_.path.empty()) {
    done(LaunchError(absl::StatusCode::kFailedPrecondition,
                     absl::StrCat("cannot start agents: ", search_.Problem())));
    return;
  }
  const std::string& shim_path = search_.path;
  if (absl::Status status = fs::MakeDirs(spec.run_dir, 0700); !status.ok()) {
    done(status);
    return;
  }
  // A previous run's records must not describe this launch to a daemon that restarts before it
  // is confirmed (UnconfirmedLaunch). The pid records are cleared in place, not unlinked: the
  // shim rewrites them in the same inodes (shim/pid_record.h).
  unlink((spec.run_dir + "/exit").c_str());
  for (const char* record : {shim::kAgentPidFile, shim::kShimPidFile}) {
    const std::string path = spec.run_dir + "/" + record;
    if (const int err = shim::ClearPidRecord(path); err != 0) {
      done(LaunchError(absl::StatusCode::kInternal,
                       absl::StrCat("cannot clear or remove ", path, ": ", std::strerror(err))));
      return;
    }
  }
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) {
    done(LaunchError(absl::StatusCode::kInternal,
                     absl::StrCat("cannot create the shim pipe: ", std::strerror(errno))));
    return;
  }
  std::vector<std::string> argv = ShimArgv(spec, shim_path);
  const std::string shim_log = spec.run_dir + "/shim.log";
  // The spawn itself runs on the spawner thread; everything after it back on the owner thread.
  if (spawner_ == nullptr) {
    spawner_ = std::make_unique<Spawner>(start_, log_);
  }
  spawner_->Submit([this, argv = std::move(argv), env = spec.env, shim_path = shim_path, shim_log,
                    exec = spec.exec, ready_read = ready[0], ready_write = ready[1],
                    done = std::move(done)](ShimLauncher* launcher) mutable {
    pid_t shim_pid = 0;
    int rc = 0;
    std::string failure;  // the launcher's, when it may have forked: no second attempt
    bool spawned = false;
    if (launcher != nullptr) {
      // The shim's log, opened here as posix_spawn's file action opens it in the child.
      const int log_fd = open(shim_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      if (log_fd >= 0) {
        ShimLauncher::Result forked = launcher->Launch(shim_path, argv, env, log_fd, ready_write);
        close(log_fd);
        if (forked.outcome != ShimLauncher::Outcome::kNotTried) {
          close(ready_write);
          spawned = true;
          shim_pid = forked.pid;
          failure = std::move(forked.message);
        }
      }
    }
    if (!spawned) {
      rc = SpawnShim(std::move(argv), std::move(env), shim_path, shim_log, ready_write, &shim_pid);
    }
    asio::post(io_, [this, rc, shim_pid, failure = std::move(failure), shim_path, shim_log, exec,
                     ready_read, done = std::move(done)]() mutable {
      if (rc != 0 || !failure.empty()) {
        close(ready_read);
        done(LaunchError(absl::StatusCode::kInternal,
                         !failure.empty()
                             ? failure
                             : absl::StrCat("cannot spawn ", shim_path, ": ", std::strerror(rc))));
        return;
      }
      AwaitHandshake(shim_pid, ready_read, exec, shim_log, std::move(done));
    });
  });
}

void ShimBackend::AwaitHandshake(pid_t shim_pid, int ready_fd, const std::string& exec,
                                 const std::string& shim_log,
                                 std::function<void(absl::StatusOr<Launched>)> done) {
  struct Handshake {
    Handshake(asio::io_context& io, int fd) : pipe(io, fd), timer(io) {}
    asio::posix::stream_descriptor pipe;
    asio::steady_timer timer;
    asio::streambuf buffer;
    bool finished = false;
  };
  auto handshake = std::make_shared<Handshake>(io_, ready_fd);
  auto finish = [this, handshake, shim_pid, exec, log_hint = shim_log,
                 done = std::move(done)](const boost::system::error_code& ec) {
    if (handshake->finished) {
      return;
    }
    handshake->finished = true;
    handshake->timer.cancel();
    std::istream in(&handshake->buffer);
    std::string line;
    std::getline(in, line);
    handshake->pipe.close();
    std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    ProcessIdentity shim{shim_pid, ProcessStartTime(shim_pid).value_or(0)};
    if (words.size() >= 3 && words[0] == "started") {
      Launched launched;
      launched.shim = shim;
      int agent_pid = 0;
      if (absl::SimpleAtoi(words[1], &agent_pid)) {
        launched.agent = {agent_pid, ProcessStartTime(agent_pid).value_or(0)};
        done(launched);
        return;
      }
    }
    // Not started: make sure the shim is reaped whenever it exits.
    WatchExit(shim, [] {});
    if (words.size() >= 2 && words[0] == "exec-failed") {
      int err = 0;
      if (!absl::SimpleAtoi(words[1], &err)) {
        err = 0;  // "exec-failed" without a number: strerror(0) says no more than we know
      }
      done(LaunchError(
          err == ENOENT ? absl::StatusCode::kNotFound : absl::StatusCode::kFailedPrecondition,
          absl::StrCat("cannot execute '", exec, "': ", std::strerror(err))));
      return;
    }
    done(LaunchError(
        absl::StatusCode::kInternal,
        ec == asio::error::operation_aborted
            ? absl::StrCat("ktesio-shim did not confirm the launch within 10 s (see ", log_hint,
                           ")")
            : absl::StrCat("ktesio-shim ended before confirming the launch (see ", log_hint, ")")));
  };
  auto shared_finish = std::make_shared<decltype(finish)>(std::move(finish));
  asio::async_read_until(
      handshake->pipe, handshake->buffer, '\n',
      [shared_finish](const boost::system::error_code& ec, size_t) { (*shared_finish)(ec); });
  handshake->timer.expires_after(std::chrono::seconds(10));
  handshake->timer.async_wait([handshake, shared_finish](const boost::system::error_code& ec) {
    if (!ec) {
      handshake->pipe.cancel();
      (*shared_finish)(asio::error::operation_aborted);
    }
  });
}

bool ShimBackend::WatchExit(const ProcessIdentity& shim, std::function<void()> on_exit) {
  int fd = PidfdOpen(shim.pid);
  if (fd < 0) {
    Reap(shim.pid);
    asio::post(io_, std::move(on_exit));
    return errno == ESRCH;
  }
  // Verify identity after opening: the pidfd pins the process, so a pid reused before the open
  // shows a different start time here.
  absl::StatusOr<int64_t> start = ProcessStartTime(shim.pid);
  if (shim.start_time != 0 && start.ok() && *start != shim.start_time) {
    close(fd);
    return false;
  }
  const uint64_t id = next_watch_++;
  auto watch = std::make_unique<Watch>(io_);
  watch->descriptor.assign(fd);
  watch->pid = shim.pid;
  watches_[id] = std::move(watch);
  Arm(id, std::move(on_exit));
  return true;
}

void ShimBackend::Arm(uint64_t id, std::function<void()> on_exit) {
  auto it = watches_.find(id);
  if (it == watches_.end()) {
    return;
  }
  it->second->descriptor.async_wait(
      asio::posix::stream_descriptor::wait_read,
      [this, id, on_exit = std::move(on_exit)](const boost::system::error_code& ec) mutable {
        auto found = watches_.find(id);
        if (found == watches_.end() || ec == asio::error::operation_aborted) {
          return;
        }
        // Readiness can be stale: the reactor may hand an event of a just-closed descriptor
        // that had the same number (e.g. the handshake pipe's hang-up) to this one. A pidfd is
        // readable only once its process has exited, so ask the kernel directly.
        pollfd pfd{found->second->descriptor.native_handle(), POLLIN, 0};
        if (poll(&pfd, 1, 0) != 1) {
          Arm(id, std::move(on_exit));
          return;
        }
        pid_t pid = found->second->pid;
        watches_.erase(found);
        Reap(pid);
        on_exit();
      });
}

void ShimBackend::Reap(pid_t pid) {
  // Only our own children can be reaped; an adopted shim belongs to init (ECHILD is fine).
  while (waitpid(pid, nullptr, WNOHANG) < 0 && errno == EINTR) {
  }
}

bool ShimBackend::WatchRespawn(const ProcessIdentity& shim, const std::string& run_dir,
                               std::function<void()> on_respawn) {
  for (auto& [id, watch] : watches_) {
    if (watch->pid == shim.pid) {
      watch->respawns =
          std::make_unique<fs::DirectoryWatch>(io_, run_dir, kRespawnedFile, std::move(on_respawn));
      return watch->respawns->ok();
    }
  }
  return false;
}

absl::Status ShimBackend::GrantRespawn(const std::string& run_dir, const RespawnGrant& grant) {
  // Atomic, not durable, like the shim's own records: a grant describes a live run only.
  return fs::WriteFileAtomic(run_dir + "/" + kRespawnGrantFile, shim::FormatRespawnGrant(grant),
                             0600, fs::Durability::kAtomicOnly);
}

bool ShimBackend::WithdrawRespawn(const std::string& run_dir) {
  // The shim takes a grant by unlinking it too: exactly one of the two unlinks succeeds.
  return unlink((run_dir + "/" + kRespawnGrantFile).c_str()) == 0;
}

absl::StatusOr<std::optional<Respawned>> ShimBackend::TakeRespawned(const std::string& run_dir) {
  const std::string path = run_dir + "/" + kRespawnedFile;
  // The run dir is in the agent's home: records are small, and never a FIFO to block on.
  absl::StatusOr<std::string> text = fs::ReadRegularFile(path, kMaxRecordBytes);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) {
      return std::nullopt;
    }
    // Read once, like any record (remove(): also an empty directory in its place).
    std::remove(path.c_str());
    return absl::DataLossError(absl::StrCat("the relaunch record ", path,
                                            " could not be read: ", text.status().message()));
  }
  unlink(path.c_str());
  // "<exit record>\nrun_ms N\npid N\nstart_time N\nstarted_at_ms N\n"
  std::vector<std::string> lines = absl::StrSplit(*text, '\n', absl::SkipEmpty());
  auto number = [&](size_t index, const std::string& key, int64_t* out) {
    return lines.size() > index && absl::StartsWith(lines[index], key + " ") &&
           absl::SimpleAtoi(absl::string_view(lines[index]).substr(key.size() + 1), out);
  };
  Respawned respawned;
  int64_t pid = 0;
  std::optional<ExitRecord> exit = lines.size() == 5 ? ParseExitRecord(lines[0]) : std::nullopt;
  if (!exit.has_value() || !number(1, "run_ms", &respawned.run_ms) || !number(2, "pid", &pid) ||
      !number(3, "start_time", &respawned.agent.start_time) ||
      !number(4, "started_at_ms", &respawned.started_at_ms) || pid <= 1 ||
      pid > std::numeric_limits<pid_t>::max()) {
    // Not the shim's format (it writes the record whole, by rename): say so, never echo it.
    return absl::DataLossError(absl::StrCat("the relaunch record ", path, " (", text->size(),
                                            " bytes, ", lines.size(), " lines) is malformed"));
  }
  respawned.exit = *exit;
  respawned.agent.pid = static_cast<pid_t>(pid);
  return respawned;
}

std::optional<ExitRecord> ShimBackend::ReadExit(const std::string& run_dir) {
  absl::StatusOr<std::string> text = fs::ReadRegularFile(run_dir + "/exit", kMaxRecordBytes);
  if (!text.ok()) {
    return std::nullopt;
  }
  std::optional<ExitRecord> record = ParseExitRecord(*text);
  if (struct stat st{}; record.has_value() && stat((run_dir + "/exit").c_str(), &st) == 0) {
    record->at_ms = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
  }
  return record;
}

std::optional<Launched> ShimBackend::UnconfirmedLaunch(const std::string& run_dir) {
  const pid_t shim_pid = shim::ReadPidRecord(run_dir + "/" + shim::kShimPidFile);
  if (shim_pid == 0) {
    return std::nullopt;
  }
  // Only a shim running this very run directory counts (a reused pid would not).
  absl::StatusOr<std::string> cmdline = fs::ReadFile(absl::StrCat("/proc/", shim_pid, "/cmdline"));
  std::string wanted = "--run-dir";
  wanted += '\0';
  wanted += run_dir;
  wanted += '\0';
  absl::StatusOr<int64_t> shim_start = ProcessStartTime(shim_pid);
  if (!cmdline.ok() || cmdline->find(wanted) == std::string::npos || !shim_start.ok()) {
    return std::nullopt;
  }
  Launched left;
  left.shim = {shim_pid, *shim_start};
  // The shim writes its pid file as it starts: the file's time is the launch's.
  if (struct stat st{}; stat((run_dir + "/" + shim::kShimPidFile).c_str(), &st) == 0) {
    left.started_at_ms =
        static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
  }
  const pid_t agent_pid = shim::ReadPidRecord(run_dir + "/" + shim::kAgentPidFile);
  absl::StatusOr<std::string> stat = fs::ReadFile(absl::StrCat("/proc/", agent_pid, "/stat"));
  if (agent_pid != 0 && stat.ok()) {
    // Field 4, after the parenthesised command (which may itself hold spaces and parentheses).
    const size_t close = stat->rfind(')');
    const std::vector<std::string> fields =
        absl::StrSplit(stat->substr(close == std::string::npos ? 0 : close + 2), ' ');
    int parent = 0;
    absl::StatusOr<int64_t> agent_start = ProcessStartTime(agent_pid);
    if (fields.size() > 1 && absl::SimpleAtoi(fields[1], &parent) && parent == shim_pid &&
        agent_start.ok()) {
      left.agent = {agent_pid, *agent_start};
    }
  }
  return left;
}

absl::Status ShimBackend::SignalGroup(pid_t leader, int signal) {
  if (leader <= 1) {
    return absl::InvalidArgumentError("refusing to signal a group without a leader");
  }
  if (kill(-leader, signal) != 0) {
    if (errno == ESRCH) {
      return absl::NotFoundError(absl::StrCat("process group ", leader, " is gone"));
    }
    return absl::InternalError(
        absl::StrCat("cannot signal process group ", leader, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

bool ShimBackend::GroupAlive(pid_t leader) {
  if (leader <= 1 || (kill(-leader, 0) != 0 && errno == ESRCH)) {
    return false;
  }
  // kill() also sees zombies waiting for a reaper; only count processes that can still run.
  DIR* proc = opendir("/proc");
  if (proc == nullptr) {
    return true;
  }
  bool alive = false;
  while (dirent* entry = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid)) {
      continue;
    }
    // A process may exit while we read: POSIX reads (see ProcessStartTime), a failure skips it.
    const std::string text = fs::ReadFile(absl::StrCat("/proc/", pid, "/stat")).value_or("");
    size_t paren = text.rfind(')');
    if (paren == std::string::npos || paren + 2 >= text.size()) {
      continue;
    }
    std::vector<std::string> fields = absl::StrSplit(text.substr(paren + 2), ' ');
    int pgrp = 0;
    if (fields.size() > 2 && absl::SimpleAtoi(fields[2], &pgrp) && pgrp == leader &&
        fields[0] != "Z" && fields[0] != "X") {
      alive = true;
      break;
    }
  }
  closedir(proc);
  return alive;
}

bool ShimBackend::IsAlive(const ProcessIdentity& identity) {
  if (identity.pid <= 0) {
    return false;
  }
  absl::StatusOr<int64_t> start = ProcessStartTime(identity.pid);
  return start.ok() && *start == identity.start_time;
}

absl::Status ShimBackend::RunDetached(const std::string& exec, const std::vector<std::string>& args,
                                      const std::vector<std::string>& env, const std::string& cwd,
                                      std::chrono::milliseconds limit) {
  std::vector<std::string> argv = {exec};
  argv.insert(argv.end(), args.begin(), args.end());
  CArgs c_argv(argv);
  CArgs c_env(env);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  InitDetachedSpawnAttributes(&attr);
  pid_t pid = 0;
  // posix_spawnp searches PATH of the daemon; a template exec is usually absolute or on PATH.
  int rc = posix_spawnp(&pid, exec.c_str(), &actions, &attr, c_argv.pointers.data(),
                        c_env.pointers.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return LaunchError(absl::StatusCode::kFailedPrecondition,
                       absl::StrCat("cannot execute '", exec, "': ", std::strerror(rc)));
  }
  // A template that hangs (`sleep 777` as a stop template) must not outlive what it was for.
  // Its pid, and so its process group's id, stays taken until the exit watch reaps it, on this
  // thread, which also runs the timer: the kill never reaches a reused id.
  auto exited = std::make_shared<bool>(false);
  auto deadline = std::make_shared<asio::steady_timer>(io_, limit);
  templates_[pid] = exec;
  WatchExit({pid, 0}, [this, pid, exited, deadline] {
    *exited = true;
    templates_.erase(pid);
    deadline->cancel();
  });
  deadline->async_wait(
      [this, pid, exec, limit, exited, deadline](const boost::system::error_code& ec) {
        if (ec || *exited) {
          return;
        }
        templates_.erase(pid);
        ::kill(-pid, SIGKILL);
        log_->warn("template killed with its process group exec={} pid={} after_ms={}", exec, pid,
                   limit.count());
      });
  return absl::OkStatus();
}

}  // namespace ktesio::daemon::process
