#include "fleet/batch.h"

#include <map>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "engine/view.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/labels.h"
#include "paths/paths.h"
#include "supervisor/supervisor.h"

namespace ktesio::daemon::fleet {
namespace {

namespace reason = contract::reason;

absl::Status Usage(std::string_view message) {
  return contract::MakeError(absl::StatusCode::kInvalidArgument, reason::kInvalidArgument, message);
}

// What collects the per-instance results; shared by every pending completion.
struct Collector {
  v1::BatchAgentsResponse* response = nullptr;
  engine::Engine::Finish finish;
  std::map<std::string, v1::BatchResult> results;
  size_t pending = 0;

  void Done(v1::BatchResult result) {
    std::string name = result.name();
    results[name] = std::move(result);
    if (--pending == 0) {
      for (auto& [unused, r] : results) {
        *response->add_results() = std::move(r);
      }
      finish(absl::OkStatus());
    }
  }
};

void FillError(const absl::Status& status, v1::BatchResult* result) {
  result->set_ok(false);
  std::string why = contract::ErrorReason(status);
  result->mutable_error()->set_reason(why.empty() ? std::string(reason::kInternal) : why);
  result->mutable_error()->set_message(std::string(status.message()));
}

// The notice for a member the verb has nothing to do to, or "" when it has.
std::string AlreadyThere(v1::BatchVerb verb, v1::AgentState state) {
  switch (verb) {
    case v1::BATCH_VERB_START:
      if (state == v1::AGENT_STATE_RUNNING || state == v1::AGENT_STATE_STARTING) {
        return "already running";
      }
      break;
    case v1::BATCH_VERB_STOP:
      if (state == v1::AGENT_STATE_REGISTERED || state == v1::AGENT_STATE_STOPPED ||
          state == v1::AGENT_STATE_FAILED) {
        return "already stopped";
      }
      break;
    case v1::BATCH_VERB_PAUSE:
      if (state == v1::AGENT_STATE_PAUSED) {
        return "already paused";
      }
      break;
    case v1::BATCH_VERB_RESUME:
      if (state == v1::AGENT_STATE_RUNNING) {
        return "already running";
      }
      break;
    default:
      break;
  }
  return "";
}

// The result of a member's command: its notices and the instance as it is now (also after a
// refusal: its state and cause are reported whenever it exists).
engine::Lifecycle::Done Answer(engine::Engine& engine, const std::string& name,
                               std::function<void(v1::BatchResult)> done) {
  return [&engine, name, done = std::move(done)](absl::Status status,
                                                 std::vector<std::string> notices) {
    v1::BatchResult result;
    result.set_name(name);
    if (!status.ok()) {
      FillError(status, &result);
    } else {
      result.set_ok(true);
    }
    // A refused step leaves the instance as it was: its state is reported all the same.
    if (absl::StatusOr<v1::AgentInstance> view = engine.instances().View(name); view.ok()) {
      *result.mutable_instance() = std::move(*view);
    }
    result.mutable_notices()->Add(notices.begin(), notices.end());
    done(std::move(result));
  };
}

std::optional<uint32_t> StopWindow(const v1::BatchAgentsRequest& batch) {
  return batch.has_timeout_seconds() ? std::optional<uint32_t>(batch.timeout_seconds())
                                     : std::nullopt;
}

void LaunchOne(engine::Engine& engine, const v1::BatchAgentsRequest& batch, const std::string& name,
               std::function<void(v1::BatchResult)> done) {
  engine::Lifecycle& lifecycle = engine.lifecycle();
  switch (batch.verb()) {
    case v1::BATCH_VERB_START:
      lifecycle.Start(name, Answer(engine, name, std::move(done)));
      return;
    case v1::BATCH_VERB_STOP:
      lifecycle.Stop(name, StopWindow(batch), Answer(engine, name, std::move(done)));
      return;
    case v1::BATCH_VERB_RESTART:
      lifecycle.Restart(name, StopWindow(batch), Answer(engine, name, std::move(done)));
      return;
    case v1::BATCH_VERB_PAUSE:
      lifecycle.Pause(name, Answer(engine, name, std::move(done)));
      return;
    case v1::BATCH_VERB_RESUME:
      lifecycle.Resume(name, Answer(engine, name, std::move(done)));
      return;
    case v1::BATCH_VERB_REMOVE:
      lifecycle.Remove(
          name, {.force = batch.force(), .delete_home = batch.delete_home()},
          [&engine, name, done = std::move(done)](absl::StatusOr<store::InstanceRow> removed) {
            v1::BatchResult result;
            result.set_name(name);
            if (removed.ok()) {
              result.set_ok(true);
            } else {
              FillError(removed.status(), &result);
              // A refused removal leaves the instance registered: its state is reported.
              if (absl::StatusOr<v1::AgentInstance> view = engine.instances().View(name);
                  view.ok()) {
                *result.mutable_instance() = std::move(*view);
              }
            }
            done(std::move(result));
          });
      return;
    default:
      break;
  }
  v1::BatchResult result;
  result.set_name(name);
  FillError(Usage("unknown verb"), &result);
  done(std::move(result));
}

}  // namespace

std::string_view VerbName(v1::BatchVerb verb) {
  switch (verb) {
    case v1::BATCH_VERB_START:
      return "start";
    case v1::BATCH_VERB_STOP:
      return "stop";
    case v1::BATCH_VERB_RESTART:
      return "restart";
    case v1::BATCH_VERB_PAUSE:
      return "pause";
    case v1::BATCH_VERB_RESUME:
      return "resume";
    case v1::BATCH_VERB_REMOVE:
      return "remove";
    default:
      return "unknown";
  }
}

void RunBatch(engine::Engine& engine, const v1::BatchAgentsRequest& request,
              v1::BatchAgentsResponse* response, engine::Engine::Finish finish) {
  if (VerbName(request.verb()) == "unknown") {
    finish(Usage("BatchAgents needs a verb (start, stop, restart, pause, resume or remove)"));
    return;
  }
  const bool by_selector = !request.selector().empty();
  if (request.all() && (by_selector || request.names_size() > 0)) {
    finish(Usage("'all' selects every instance: give no names and no selector with it"));
    return;
  }
  if (!request.all() && !by_selector && request.names_size() == 0) {
    finish(Usage("name the instances, give a selector, or ask for all"));
    return;
  }
  absl::StatusOr<contract::Selector> selector = contract::Selector::Parse(request.selector());
  if (!selector.ok()) {
    finish(selector.status());
    return;
  }
  if (request.verb() == v1::BATCH_VERB_STOP || request.verb() == v1::BATCH_VERB_RESTART) {
    if (absl::Status window = supervisor::CheckStopWindow(StopWindow(request)); !window.ok()) {
      finish(window);  // once for the batch, not once per instance
      return;
    }
  }
  absl::StatusOr<std::vector<engine::Instances::Listed>> every = engine.instances().List();
  if (!every.ok()) {
    finish(every.status());
    return;
  }
  std::map<std::string, v1::AgentState> existing;                // every instance
  std::map<std::string, std::optional<v1::AgentState>> targets;  // nullopt: no such instance
  for (const engine::Instances::Listed& item : *every) {
    const v1::AgentState state = engine::StateFromWire(item.row.state);
    existing[item.row.name] = state;
    if (request.all() || (by_selector && selector->Matches(item.labels))) {
      targets[item.row.name] = state;
    }
  }
  for (const std::string& name : request.names()) {
    const auto found = existing.find(name);
    targets[name] = found == existing.end() ? std::nullopt : std::optional(found->second);
  }
  if (targets.empty()) {
    finish(contract::MakeError(
        absl::StatusCode::kNotFound, reason::kNoMatch,
        request.all()
            ? std::string("there are no Agent Instances")
            : absl::StrCat("no Agent Instance matches the selector '", request.selector(), "'")));
    return;
  }
  auto collector = std::make_shared<Collector>();
  collector->response = response;
  collector->finish = std::move(finish);
  collector->pending = targets.size();
  for (const auto& [name, state] : targets) {
    auto done = [collector](v1::BatchResult result) { collector->Done(std::move(result)); };
    if (!state.has_value()) {
      v1::BatchResult result;
      result.set_name(name);
      absl::Status invalid = ValidateInstanceName(name);  // a malformed name: usage, not absence
      FillError(invalid.ok()
                    ? contract::MakeError(absl::StatusCode::kNotFound, reason::kNotFound,
                                          absl::StrCat("no Agent Instance named '", name, "'"))
                    : invalid,
                &result);
      done(std::move(result));
      continue;
    }
    if (std::string already = AlreadyThere(request.verb(), *state); !already.empty()) {
      v1::BatchResult result;
      result.set_name(name);
      result.set_ok(true);
      result.add_notices(already);
      if (absl::StatusOr<v1::AgentInstance> view = engine.instances().View(name, true); view.ok()) {
        *result.mutable_instance() = std::move(*view);
      }
      done(std::move(result));
      continue;
    }
    LaunchOne(engine, request, name, std::move(done));
  }
}

}  // namespace ktesio::daemon::fleet
