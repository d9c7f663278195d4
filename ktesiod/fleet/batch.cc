#include "fleet/batch.h"

#include <map>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"

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

// Starts the single-instance operation; `done` gets the result on the owner thread.
template <typename Request, typename Response, typename Method>
void Launch(engine::Engine& engine, Method method, Request request,
            std::function<void(v1::BatchResult)> done) {
  auto req = std::make_shared<Request>(std::move(request));
  auto resp = std::make_shared<Response>();
  (engine.*method)(*req, resp.get(), [req, resp, done = std::move(done)](absl::Status status) {
    v1::BatchResult result;
    result.set_name(req->name());
    if (!status.ok()) {
      FillError(status, &result);
    } else {
      result.set_ok(true);
      if constexpr (requires { resp->instance(); }) {
        *result.mutable_instance() = resp->instance();
      }
    }
    if constexpr (requires { resp->notices(); }) {
      for (const std::string& notice : resp->notices()) {
        result.add_notices(notice);
      }
    }
    done(std::move(result));
  });
}

void LaunchOne(engine::Engine& engine, const v1::BatchAgentsRequest& batch, const std::string& name,
               std::function<void(v1::BatchResult)> done) {
  using engine::Engine;
  switch (batch.verb()) {
    case v1::BATCH_VERB_START: {
      v1::StartAgentRequest r;
      r.set_name(name);
      Launch<v1::StartAgentRequest, v1::StartAgentResponse>(engine, &Engine::StartAgent, r,
                                                            std::move(done));
      return;
    }
    case v1::BATCH_VERB_STOP: {
      v1::StopAgentRequest r;
      r.set_name(name);
      if (batch.has_timeout_seconds()) {
        r.set_timeout_seconds(batch.timeout_seconds());
      }
      Launch<v1::StopAgentRequest, v1::StopAgentResponse>(engine, &Engine::StopAgent, r,
                                                          std::move(done));
      return;
    }
    case v1::BATCH_VERB_RESTART: {
      v1::RestartAgentRequest r;
      r.set_name(name);
      if (batch.has_timeout_seconds()) {
        r.set_timeout_seconds(batch.timeout_seconds());
      }
      Launch<v1::RestartAgentRequest, v1::RestartAgentResponse>(engine, &Engine::RestartAgent, r,
                                                                std::move(done));
      return;
    }
    case v1::BATCH_VERB_PAUSE: {
      v1::PauseAgentRequest r;
      r.set_name(name);
      Launch<v1::PauseAgentRequest, v1::PauseAgentResponse>(engine, &Engine::PauseAgent, r,
                                                            std::move(done));
      return;
    }
    case v1::BATCH_VERB_RESUME: {
      v1::ResumeAgentRequest r;
      r.set_name(name);
      Launch<v1::ResumeAgentRequest, v1::ResumeAgentResponse>(engine, &Engine::ResumeAgent, r,
                                                              std::move(done));
      return;
    }
    case v1::BATCH_VERB_REMOVE: {
      v1::RemoveAgentRequest r;
      r.set_name(name);
      r.set_delete_home(batch.delete_home());
      r.set_force(batch.force());
      Launch<v1::RemoveAgentRequest, v1::RemoveAgentResponse>(engine, &Engine::RemoveAgent, r,
                                                              std::move(done));
      return;
    }
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
  v1::ListAgentsRequest list_request;
  list_request.set_selector(request.selector());
  list_request.set_skip_resources(true);
  v1::ListAgentsResponse listed;
  if (absl::Status status = engine.ListAgents(list_request, &listed); !status.ok()) {
    finish(status);
    return;
  }
  std::map<std::string, v1::AgentState> existing;  // every instance, when names are given
  if (request.names_size() > 0) {
    v1::ListAgentsRequest every;
    every.set_skip_resources(true);
    v1::ListAgentsResponse all;
    if (absl::Status status = engine.ListAgents(every, &all); !status.ok()) {
      finish(status);
      return;
    }
    for (const v1::AgentInstance& instance : all.instances()) {
      existing[instance.name()] = instance.state();
    }
  }
  std::map<std::string, std::optional<v1::AgentState>> targets;  // nullopt: no such instance
  if (request.all() || by_selector) {
    for (const v1::AgentInstance& instance : listed.instances()) {
      targets[instance.name()] = instance.state();
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
      FillError(contract::MakeError(absl::StatusCode::kNotFound, reason::kNotFound,
                                    absl::StrCat("no Agent Instance named '", name, "'")),
                &result);
      done(std::move(result));
      continue;
    }
    if (std::string already = AlreadyThere(request.verb(), *state); !already.empty()) {
      v1::BatchResult result;
      result.set_name(name);
      result.set_ok(true);
      result.add_notices(already);
      v1::GetAgentRequest get;
      get.set_name(name);
      v1::GetAgentResponse got;
      if (engine.GetAgent(get, &got).ok()) {
        *result.mutable_instance() = got.instance();
      }
      done(std::move(result));
      continue;
    }
    LaunchOne(engine, request, name, std::move(done));
  }
}

}  // namespace ktesio::daemon::fleet
