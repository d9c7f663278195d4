#include "engine/lifecycle.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/limits.h"

namespace ktesio::daemon::engine {

namespace reason = contract::reason;

void Lifecycle::Send(const std::string& name, const std::string& text,
                     std::function<void(absl::StatusOr<supervisor::Supervisor::Sent>)> done) {
  if (text.find('\n') != std::string::npos) {
    done(contract::MakeError(absl::StatusCode::kInvalidArgument, reason::kInvalidArgument,
                             "send takes one line: the text must not contain a newline"));
    return;
  }
  if (text.size() > contract::kMaxSendBytes) {
    done(
        contract::MakeError(absl::StatusCode::kInvalidArgument, reason::kInvalidArgument,
                            absl::StrCat("send takes one line of at most ", contract::kMaxSendBytes,
                                         " bytes; this one has ", text.size())));
    return;
  }
  supervisor_.SendInput(name, text, std::move(done));
}

void Lifecycle::Remove(const std::string& name, RemoveOptions options,
                       std::function<void(absl::StatusOr<store::InstanceRow>)> done) {
  absl::StatusOr<store::InstanceRow> row = registry_.Find(name);
  if (!row.ok()) {
    done(row.status());
    return;
  }
  const std::optional<supervisor::State> state = supervisor::ParseState(row->state);
  if (options.force && options.settle_rounds < kMaxSettleRounds &&
      (state == supervisor::State::kStarting || state == supervisor::State::kStopping)) {
    // --force on a transition under way: let it end, then decide again (stop what started).
    options.settle_rounds += 1;
    supervisor_.AwaitSettled(
        name, [this, name, options, done = std::move(done)](absl::Status status, auto) {
          if (!status.ok()) {  // stuck: an unconfirmed stop, an unrecorded end, no course
            done(status);
            return;
          }
          Remove(name, options, done);
        });
    return;
  }
  if (options.force &&
      (state == supervisor::State::kRunning || state == supervisor::State::kPaused)) {
    // --force stops first, with a short graceful window so the call stays bounded. The removal
    // runs from the event loop (AwaitSettled), not inside the stop's completion: it erases the
    // supervisor's runtime of the instance, which that completion is still using.
    supervisor_.Stop(
        name, 5, [this, name, options, done = std::move(done)](absl::Status status, auto) {
          if (!status.ok()) {
            done(status);
            return;
          }
          supervisor_.AwaitSettled(name, [this, name, options, done](absl::Status settled, auto) {
            if (!settled.ok()) {
              done(settled);
              return;
            }
            RemoveNow(name, options.delete_home, done);
          });
        });
    return;
  }
  RemoveNow(name, options.delete_home, done);
}

void Lifecycle::RemoveNow(const std::string& name, bool delete_home,
                          const std::function<void(absl::StatusOr<store::InstanceRow>)>& done) {
  absl::StatusOr<store::InstanceRow> current = registry_.Find(name);
  if (!current.ok()) {
    done(current.status());
    return;
  }
  const std::optional<supervisor::State> state = supervisor::ParseState(current->state);
  if (state.has_value() && supervisor::IsLive(*state)) {
    done(contract::MakeError(
        absl::StatusCode::kFailedPrecondition, reason::kInvalidState,
        absl::StrCat("cannot remove Agent Instance '", current->name, "' while it is '",
                     current->state, "' (stop it first, or pass --force)")));
    return;
  }
  supervisor_.Forget(current->name);
  if (absl::Status status = registry_.Remove(*current, delete_home); !status.ok()) {
    done(status);
    return;
  }
  hooks_.forget(current->name);
  done(std::move(*current));
}

void Lifecycle::StopAll(std::optional<uint32_t> window,
                        std::function<void(absl::StatusOr<StopAllOutcome>)> done) {
  if (absl::Status status = supervisor::CheckStopWindow(window); !status.ok()) {
    done(status);
    return;
  }
  absl::StatusOr<std::vector<store::InstanceRow>> rows = store_.ListInstances();
  if (!rows.ok()) {
    done(rows.status());
    return;
  }
  struct Fleet {
    size_t left = 0;
    StopAllOutcome outcome;
    absl::Status shutting_down;  // a member's answer when the daemon is shutting down
    std::function<void(absl::StatusOr<StopAllOutcome>)> done;
  };
  auto fleet = std::make_shared<Fleet>();
  fleet->done = std::move(done);
  std::vector<std::string> live;
  for (const store::InstanceRow& row : *rows) {
    const supervisor::State state = supervisor::RowState(row);
    if (state == supervisor::State::kRunning || state == supervisor::State::kPaused) {
      live.push_back(row.name);
    } else if (state == supervisor::State::kStarting || state == supervisor::State::kStopping) {
      fleet->outcome.notices.push_back(absl::StrCat(
          row.name, ": '", row.state, "', left to finish that transition; not stopped"));
    } else if (supervisor_.RestartPending(row.name)) {
      live.push_back(row.name);  // Stop cancels the pending restart
    }
  }
  if (live.empty()) {
    fleet->done(std::move(fleet->outcome));
    return;
  }
  fleet->left = live.size();
  for (const std::string& name : live) {
    supervisor_.Stop(name, window,
                     [fleet, name](absl::Status status, std::vector<std::string> notices) {
                       StopAllOutcome& outcome = fleet->outcome;
                       for (const std::string& notice : notices) {
                         outcome.notices.push_back(absl::StrCat(name, ": ", notice));
                       }
                       if (contract::ErrorReason(status) == reason::kShuttingDown) {
                         fleet->shutting_down = status;
                       } else if (!status.ok()) {
                         outcome.notices.push_back(absl::StrCat(name, ": ", status.message()));
                       }
                       outcome.acted.push_back(name);
                       if (--fleet->left > 0) {
                         return;
                       }
                       if (!fleet->shutting_down.ok()) {
                         // Not carried out here: the stop is the next daemon's to finish, as for
                         // one instance.
                         fleet->done(fleet->shutting_down);
                         return;
                       }
                       std::sort(outcome.acted.begin(), outcome.acted.end());
                       fleet->done(std::move(outcome));
                     });
  }
}

}  // namespace ktesio::daemon::engine
