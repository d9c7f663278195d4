#include "backend_test_util.h"

#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "boost/asio/executor_work_guard.hpp"

namespace ktesio::daemon::shim::testing {

process::ShimSearch BuiltShim() { return process::ShimSearch{KTESIO_SHIM_PATH, {}}; }

absl::StatusOr<process::Launched> LaunchProbe(boost::asio::io_context& io,
                                              process::ShimBackend& backend, const TempDir& dir,
                                              std::vector<std::string> args,
                                              std::vector<std::string> env) {
  process::LaunchSpec spec;
  spec.exec = KTESIO_PROBE_PATH;
  spec.args = std::move(args);
  spec.env = std::move(env);
  spec.cwd = dir.path();
  spec.run_dir = dir.run_dir();
  spec.log_dir = dir.log_dir();
  std::optional<absl::StatusOr<process::Launched>> result;
  backend.Launch(spec, [&](absl::StatusOr<process::Launched> launched) { result = launched; });
  // The spawn runs on the backend's own thread, which posts the rest back: keep the loop
  // waiting for it.
  auto busy = boost::asio::make_work_guard(io);
  io.restart();
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (!result.has_value() && std::chrono::steady_clock::now() < deadline) {
    io.run_one_for(std::chrono::milliseconds(100));
  }
  if (!result.has_value()) {
    return absl::DeadlineExceededError("no handshake");
  }
  return *result;
}

bool Gone(pid_t pid) {
  return WaitUntil([&] {
    if (waitpid(pid, nullptr, WNOHANG) == pid) {
      return true;
    }
    return errno == ECHILD && !ReadFile(absl::StrCat("/proc/", pid, "/stat")).has_value();
  });
}

pid_t ParentOf(pid_t pid) {
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat")).value_or("");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) {
    return 0;
  }
  const std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
  int parent = 0;
  return fields.size() > 1 && absl::SimpleAtoi(fields[1], &parent) ? parent : 0;
}

}  // namespace ktesio::daemon::shim::testing
