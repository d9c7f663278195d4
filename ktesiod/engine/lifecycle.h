#pragma once

// The lifecycle commands as operators and fleet files give them, by instance name: start, stop,
// restart, pause, resume, send a line, remove, and the fleet stop. The state machine itself is
// the supervisor's; this owner adds what a command needs around it (a removal's state check and
// clean-up, the fleet stop's choice of instances, a line's validation). Lives on the engine
// thread; every completion runs there.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "registry/registry.h"
#include "store/store.h"
#include "supervisor/supervisor.h"

namespace ktesio::daemon::engine {

class Lifecycle {
 public:
  // (status, notices): the supervisor's completion.
  using Done = supervisor::Done;

  struct Hooks {
    // After an instance's row is gone: drop what the daemon keeps for it (its proxy listener
    // and metrics).
    std::function<void(const std::string& name)> forget;
  };

  Lifecycle(store::Store& store, registry::Registry& registry, supervisor::Supervisor& supervisor,
            Hooks hooks)
      : store_(store), registry_(registry), supervisor_(supervisor), hooks_(std::move(hooks)) {}

  void Start(const std::string& name, Done done) { supervisor_.Start(name, std::move(done)); }
  // `window`: the graceful stop window; nullopt = the daemon's default.
  void Stop(const std::string& name, std::optional<uint32_t> window, Done done) {
    supervisor_.Stop(name, window, std::move(done));
  }
  void Restart(const std::string& name, std::optional<uint32_t> window, Done done) {
    supervisor_.Restart(name, window, std::move(done));
  }
  void Pause(const std::string& name, Done done) { supervisor_.Pause(name, std::move(done)); }
  void Resume(const std::string& name, Done done) { supervisor_.Resume(name, std::move(done)); }

  // Writes one line (no newline in `text`, at most contract::kMaxSendBytes) to the agent's stdin;
  // `done` gets the bytes written and notices. Errors: INVALID_ARGUMENT for a newline or a longer
  // line, then as supervisor::Supervisor::SendInput.
  void Send(const std::string& name, const std::string& text,
            std::function<void(absl::StatusOr<supervisor::Supervisor::Sent>)> done);

  // Removes a stopped instance (its row; its home too with `delete_home`). With `force`, a
  // running or paused instance is stopped first (5 s graceful window). `done` gets the removed
  // row. Errors: NOT_FOUND, FAILED_PRECONDITION/INVALID_STATE for a live instance without
  // `force`, INTERNAL/IO_ERROR|STORE_ERROR.
  // `force`: a running or paused instance is stopped first (5 s window); one that is starting
  // or stopping is waited for (AwaitSettled) and then judged again, at most kMaxSettleRounds
  // times (a crash-looping start could otherwise be chased for ever).
  struct RemoveOptions {
    bool force = false;
    bool delete_home = false;
    int settle_rounds = 0;  // internal: transitions waited for so far
  };
  static constexpr int kMaxSettleRounds = 3;
  void Remove(const std::string& name, RemoveOptions options,
              std::function<void(absl::StatusOr<store::InstanceRow>)> done);

  // Stops every running or paused instance (and cancels pending restarts) at once. Instances in
  // a transition are left to finish it, with a notice. `acted` is sorted; a failed stop is a
  // notice, not an error. Errors: only an unreadable store.
  struct StopAllOutcome {
    std::vector<std::string> acted;
    std::vector<std::string> notices;
  };
  void StopAll(std::optional<uint32_t> window,
               std::function<void(absl::StatusOr<StopAllOutcome>)> done);

 private:
  void RemoveNow(const std::string& name, bool delete_home,
                 const std::function<void(absl::StatusOr<store::InstanceRow>)>& done);

  store::Store& store_;
  registry::Registry& registry_;
  supervisor::Supervisor& supervisor_;
  Hooks hooks_;
};

}  // namespace ktesio::daemon::engine
