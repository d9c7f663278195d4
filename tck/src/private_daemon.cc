#include "private_daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/memory/memory.h"
#include "ktesio/contract/status_macros.h"
#include "ktesio/v1/system.grpc.pb.h"

namespace ktesio::tck {
namespace {

namespace fs = std::filesystem;

// The whole file, or "" when it cannot be read.
std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Kills what the daemon at `state_dir` may have left running: each agent's process group and
// shim, when /proc still shows them working in (or naming) that state dir.
void KillLeftoverAgents(const std::string& state_dir) {
  std::error_code ec;
  for (fs::directory_iterator it(state_dir + "/agents", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string run = it->path().string() + "/run";
    for (const std::string file : {"/agent.pid", "/shim.pid"}) {
      pid_t pid = std::atoi(ReadFile(run + file).c_str());
      if (pid <= 1) {
        continue;
      }
      std::error_code ec2;
      std::string cwd = fs::read_symlink("/proc/" + std::to_string(pid) + "/cwd", ec2).string();
      std::string cmdline = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
      if (cwd.rfind(state_dir, 0) == 0 || cmdline.find(state_dir) != std::string::npos) {
        kill(file == "/agent.pid" ? -pid : pid, SIGKILL);
      }
    }
  }
}

}  // namespace

bool DaemonAnswers(const std::string& socket) {
  auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  auto stub = ktesio::v1::SystemService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  ktesio::v1::GetVersionRequest request;
  ktesio::v1::GetVersionResponse response;
  return stub->GetVersion(&ctx, request, &response).ok();
}

absl::StatusOr<std::unique_ptr<PrivateDaemon>> PrivateDaemon::Start(const std::string& ktesiod,
                                                                    const std::string& probe) {
  auto daemon = absl::WrapUnique(new PrivateDaemon());
  char tmpl[] = "/tmp/kt-tck-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    return absl::InternalError("mkdtemp failed");
  }
  daemon->dir_ = tmpl;
  daemon->state_ = daemon->dir_ + "/state";
  daemon->socket_ = daemon->dir_ + "/d.sock";
  daemon->log_ = daemon->dir_ + "/ktesiod.log";
  KT_RETURN_IF_ERROR(daemon->Launch(ktesiod, probe));
  KT_RETURN_IF_ERROR(daemon->AwaitAnswer());
  return daemon;
}

absl::Status PrivateDaemon::Launch(const std::string& ktesiod, const std::string& probe) {
  pid_ = fork();
  if (pid_ < 0) {
    return absl::InternalError("fork failed");
  }
  if (pid_ == 0) {
    int log = open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(log, 1);
    dup2(log, 2);
    setpgid(0, 0);
    std::string probe_dir = fs::path(probe).parent_path().string();
    const char* path = std::getenv("PATH");
    setenv("PATH", (probe_dir + ":" + (path == nullptr ? "/usr/bin:/bin" : path)).c_str(), 1);
    execl(ktesiod.c_str(), ktesiod.c_str(), "--state-dir", state_.c_str(), "--socket",
          socket_.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return absl::OkStatus();
}

absl::Status PrivateDaemon::AwaitAnswer() {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < end) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::UnavailableError("ktesiod exited during startup:\n" + ReadFile(log_));
    }
    if (access(socket_.c_str(), F_OK) == 0 && DaemonAnswers(socket_)) {
      return absl::OkStatus();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return absl::UnavailableError("ktesiod did not answer within 15 s:\n" + ReadFile(log_));
}

PrivateDaemon::~PrivateDaemon() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) != pid_) {
      if (std::chrono::steady_clock::now() >= end) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (!dir_.empty()) {
    KillLeftoverAgents(state_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

}  // namespace ktesio::tck
