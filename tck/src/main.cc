// ktesio-tck: certify an adapter declaration against a ktesio.v1 daemon (a private one by
// default, or a running one with --socket); with --subject-program, against the subject's own
// program where a section allows it. Exit 0 iff no section failed; 2 usage; 1 when the daemon
// cannot be reached or started.

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "ktesio/tck/kit.h"
#include "ktesio/v1/system.grpc.pb.h"

namespace {

namespace fs = std::filesystem;
using ktesio::tck::Options;
using ktesio::tck::Report;

constexpr char kUsage[] =
    "usage: ktesio-tck (--manifest DIR_OR_FILE | --kind BUILTIN) [--json] [--socket PATH]\n"
    "                  [--section ID ...] [--probe PATH] [--subject-program]\n";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string SelfDir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : self.parent_path().string();
}

bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

std::string FindNear(const char* env, const std::vector<std::string>& candidates) {
  if (const char* value = std::getenv(env); value != nullptr && *value != '\0') return value;
  for (const std::string& c : candidates) {
    if (IsExecutable(c)) {
      std::error_code ec;
      fs::path canonical = fs::canonical(c, ec);
      return ec ? c : canonical.string();
    }
  }
  return "";
}

bool DaemonAnswers(const std::string& socket) {
  auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  auto stub = ktesio::v1::SystemService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  ktesio::v1::GetVersionRequest request;
  ktesio::v1::GetVersionResponse response;
  return stub->GetVersion(&ctx, request, &response).ok();
}

void KillLeftoverAgents(const std::string& state_dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(state_dir + "/agents", ec)) {
    const std::string run = entry.path().string() + "/run";
    for (const std::string file : {"/agent.pid", "/shim.pid"}) {
      pid_t pid = std::atoi(ReadFile(run + file).c_str());
      if (pid <= 1) continue;
      std::error_code ec2;
      std::string cwd = fs::read_symlink("/proc/" + std::to_string(pid) + "/cwd", ec2).string();
      std::string cmdline = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
      if (cwd.rfind(state_dir, 0) == 0 || cmdline.find(state_dir) != std::string::npos) {
        kill(file == "/agent.pid" ? -pid : pid, SIGKILL);
      }
    }
  }
}

class PrivateDaemon {
 public:
  ~PrivateDaemon() { Stop(); }

  bool Start(const std::string& ktesiod, const std::string& probe, std::string* error) {
    char tmpl[] = "/tmp/kt-tck-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      *error = "mkdtemp failed";
      return false;
    }
    dir_ = tmpl;
    state_ = dir_ + "/state";
    socket_ = dir_ + "/d.sock";
    log_ = dir_ + "/ktesiod.log";
    pid_ = fork();
    if (pid_ < 0) {
      *error = "fork failed";
      return false;
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
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        *error = "ktesiod exited during startup:\n" + ReadFile(log_);
        return false;
      }
      if (access(socket_.c_str(), F_OK) == 0 && DaemonAnswers(socket_)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    *error = "ktesiod did not answer within 15 s:\n" + ReadFile(log_);
    return false;
  }

  void Stop() {
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
      pid_ = -1;
    }
    if (!dir_.empty()) {
      KillLeftoverAgents(state_);
      std::error_code ec;
      fs::remove_all(dir_, ec);
      dir_.clear();
    }
  }

  const std::string& socket() const { return socket_; }

 private:
  pid_t pid_ = -1;
  std::string dir_, state_, socket_, log_;
};

int Usage(const std::string& why) {
  std::cerr << "ktesio-tck: " << why << "\n" << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  std::string manifest, kind, socket, probe;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string section;
    if (arg == "--manifest") {
      if (!value(&manifest)) return Usage("--manifest needs a value");
    } else if (arg == "--kind") {
      if (!value(&kind)) return Usage("--kind needs a value");
    } else if (arg == "--socket") {
      if (!value(&socket)) return Usage("--socket needs a value");
    } else if (arg == "--probe") {
      if (!value(&probe)) return Usage("--probe needs a value");
    } else if (arg == "--section") {
      if (!value(&section)) return Usage("--section needs a value");
      const auto& all = ktesio::tck::AllSections();
      if (std::find(all.begin(), all.end(), section) == all.end()) {
        std::string known;
        for (const std::string& s : all) known += (known.empty() ? "" : ", ") + s;
        return Usage("unknown section '" + section + "' (sections: " + known + ")");
      }
      options.sections.push_back(section);
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--subject-program") {
      options.subject_program = true;
    } else if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else {
      return Usage("unknown argument '" + arg + "'");
    }
  }
  if (manifest.empty() == kind.empty()) return Usage("give exactly one of --manifest or --kind");
  if (!manifest.empty()) {
    std::string file = fs::is_directory(manifest) ? manifest + "/adapter.toml" : manifest;
    std::ifstream in(file, std::ios::binary);
    if (!in) return Usage("cannot read manifest " + file);
    std::ostringstream text;
    text << in.rdbuf();
    options.manifest_text = text.str();
    options.manifest_path = file;
  } else {
    options.builtin_kind = kind;
  }
  const std::string self = SelfDir();
  if (probe.empty()) {
    probe = FindNear("KTESIO_PROBE",
                     {self + "/../tests/fixtures/probe/ktesio-probe", self + "/ktesio-probe"});
  }
  if (probe.empty() || !IsExecutable(probe)) {
    return Usage("cannot find ktesio-probe (use --probe PATH or KTESIO_PROBE)");
  }
  std::error_code ec;
  fs::path probe_abs = fs::absolute(probe, ec);
  options.probe_path = ec ? probe : probe_abs.string();

  PrivateDaemon daemon;
  if (socket.empty()) {
    std::string ktesiod = FindNear("KTESIOD", {self + "/../ktesiod/ktesiod", self + "/ktesiod"});
    if (ktesiod.empty()) {
      std::cerr << "ktesio-tck: cannot find ktesiod (set KTESIOD or use --socket)\n";
      return 1;
    }
    std::string error;
    if (!daemon.Start(ktesiod, options.probe_path, &error)) {
      std::cerr << "ktesio-tck: " << error << "\n";
      return 1;
    }
    options.socket_path = daemon.socket();
  } else {
    if (!DaemonAnswers(socket)) {
      std::cerr << "ktesio-tck: cannot reach ktesiod at " << socket << "\n";
      return 1;
    }
    options.socket_path = socket;
  }

  Report report = ktesio::tck::RunKit(options);
  daemon.Stop();
  const bool ok = ktesio::tck::Conformant(report);
  if (json) {
    std::cout << ktesio::tck::ReportJson(report) << "\n";
  } else {
    std::cout << "adapter " << report.adapter_kind << " (contract 1.0.0)"
              << (options.subject_program ? ", subject's own program" : "") << "\n";
    for (const auto& s : report.sections) {
      std::cout << s.section << "  " << s.status;
      if (!s.reason.empty()) std::cout << "  " << s.reason;
      std::cout << "\n";
    }
    std::cout << "honor-system duties (not checked by any section): env_var_render, "
                 "self_update_pinning, config_layer_disclosure — unverified\n";
    std::cout << (ok ? "verdict: conformant (every machine-checkable duty exercised here held)"
                     : "verdict: NOT conformant (at least one section failed)")
              << "\n";
  }
  return ok ? 0 : 1;
}
