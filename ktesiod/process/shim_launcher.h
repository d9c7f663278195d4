#pragma once

// The daemon's end of the shim launcher (docs/shim.md "The launcher"): one `ktesio-shim
// --launcher` process, started at the first launch, that forks each new shim. A fork of that
// small, already-started process costs a fraction of an exec of the shim binary (no exec, no
// dynamic start-up of a fresh address space), and the forked shims share its pages until they
// write them.
//
// The launcher is optional: whenever it cannot be used without doubt that nothing was forked
// (it cannot be started, does not speak the protocol, has died, or answers that it did not fork),
// Launch says kNotTried and the caller spawns the shim itself. It ends when this object closes its
// socket, or when the daemon dies (the kernel closes it); shims it forked live on, like exec'd
// ones.
//
// Thread-safety: one thread (the backend's spawner thread).

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "spdlog/logger.h"

namespace ktesio::daemon::process {

class ShimLauncher {
 public:
  enum class Outcome {
    kForked,    // `pid` is the new shim
    kNotTried,  // nothing was forked: spawn the shim another way
    kFailed,    // the launch failed (`message`); a shim may have been forked and found no reader
  };
  struct Result {
    Outcome outcome = Outcome::kNotTried;
    pid_t pid = 0;
    std::string message;
  };

  explicit ShimLauncher(std::shared_ptr<spdlog::logger> log) : log_(std::move(log)) {}
  ShimLauncher(const ShimLauncher&) = delete;
  ShimLauncher& operator=(const ShimLauncher&) = delete;
  ~ShimLauncher();

  // Forks a shim with `argv` (argv[0] is the shim's path, argv[1] "--run-dir") and `env`,
  // `stderr_fd` as its stderr and `ready_fd` as its fd 3. Starts the launcher from `shim_path`
  // first when none runs (or it ran another binary). Never closes the caller's descriptors.
  Result Launch(const std::string& shim_path, const std::vector<std::string>& argv,
                const std::vector<std::string>& env, int stderr_fd, int ready_fd);

  // The launcher's pid while one runs, else 0.
  pid_t pid() const { return pid_; }

 private:
  bool Start(const std::string& shim_path);
  // Closes the socket and reaps the launcher (killed when it does not end by itself at once).
  void Stop();

  pid_t pid_ = 0;
  int socket_ = -1;
  std::string path_;
  std::shared_ptr<spdlog::logger> log_;
  // The binary that did not greet as a launcher (one from before the launcher, or one that took
  // longer than the greeting's 5 s): not tried again for that path. A launcher that could not be
  // spawned at all (descriptors, processes) is tried again at the next launch.
  std::string refused_path_;
};

}  // namespace ktesio::daemon::process
