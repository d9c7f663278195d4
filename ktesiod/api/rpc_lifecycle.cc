// The v1 edge of the lifecycle commands.

#include <optional>

#include "absl/strings/str_cat.h"
#include "api/rpc.h"

namespace ktesio::daemon::api::rpc {
namespace {

// The graceful stop window a request names, if any.
std::optional<uint32_t> StopWindow(const auto& request) {
  return request.has_timeout_seconds() ? std::optional<uint32_t>(request.timeout_seconds())
                                       : std::nullopt;
}

// Every single-instance command answers the same way: its notices, then the instance as it is
// now. `response` outlives the command (RunUnaryAsync keeps it until `finish`).
template <typename Response>
engine::Lifecycle::Done Answer(engine::Engine& engine, std::string name, Response* response,
                               Finish finish) {
  return [&engine, name = std::move(name), response, finish = std::move(finish)](
             absl::Status status, std::vector<std::string> notices) {
    for (std::string& notice : notices) {
      response->add_notices(std::move(notice));
    }
    if (status.ok()) {
      absl::StatusOr<v1::AgentInstance> view = engine.instances().View(name);
      if (view.ok()) {
        *response->mutable_instance() = std::move(*view);
      } else {
        status = view.status();
      }
    }
    finish(status);
  };
}

}  // namespace

void StartAgent(engine::Engine& engine, const v1::StartAgentRequest& request,
                v1::StartAgentResponse* response, Finish finish) {
  engine.lifecycle().Start(request.name(),
                           Answer(engine, request.name(), response, std::move(finish)));
}

void StopAgent(engine::Engine& engine, const v1::StopAgentRequest& request,
               v1::StopAgentResponse* response, Finish finish) {
  engine.lifecycle().Stop(request.name(), StopWindow(request),
                          Answer(engine, request.name(), response, std::move(finish)));
}

void RestartAgent(engine::Engine& engine, const v1::RestartAgentRequest& request,
                  v1::RestartAgentResponse* response, Finish finish) {
  engine.lifecycle().Restart(request.name(), StopWindow(request),
                             Answer(engine, request.name(), response, std::move(finish)));
}

void PauseAgent(engine::Engine& engine, const v1::PauseAgentRequest& request,
                v1::PauseAgentResponse* response, Finish finish) {
  engine.lifecycle().Pause(request.name(),
                           Answer(engine, request.name(), response, std::move(finish)));
}

void ResumeAgent(engine::Engine& engine, const v1::ResumeAgentRequest& request,
                 v1::ResumeAgentResponse* response, Finish finish) {
  engine.lifecycle().Resume(request.name(),
                            Answer(engine, request.name(), response, std::move(finish)));
}

void StopAllAgents(engine::Engine& engine, const v1::StopAllAgentsRequest& request,
                   v1::StopAllAgentsResponse* response, Finish finish) {
  engine.lifecycle().StopAll(
      StopWindow(request), [&engine, response, finish = std::move(finish)](
                               absl::StatusOr<engine::Lifecycle::StopAllOutcome> outcome) {
        if (!outcome.ok()) {
          finish(outcome.status());
          return;
        }
        for (std::string& notice : outcome->notices) {
          response->add_notices(std::move(notice));
        }
        for (const std::string& name : outcome->acted) {
          absl::StatusOr<v1::AgentInstance> view = engine.instances().View(name);
          if (view.ok()) {
            *response->add_instances() = std::move(*view);
          } else {
            response->add_notices(absl::StrCat(name, ": ", view.status().message()));
          }
        }
        finish(absl::OkStatus());
      });
}

void SendInput(engine::Engine& engine, const v1::SendInputRequest& request,
               v1::SendInputResponse* response, Finish finish) {
  engine.lifecycle().Send(
      request.name(), request.text(),
      [response, finish = std::move(finish)](absl::StatusOr<supervisor::Supervisor::Sent> sent) {
        if (!sent.ok()) {
          finish(sent.status());
          return;
        }
        response->set_bytes_written(sent->bytes);
        response->mutable_notices()->Add(sent->notices.begin(), sent->notices.end());
        finish(absl::OkStatus());
      });
}

void RemoveAgent(engine::Engine& engine, const v1::RemoveAgentRequest& request,
                 v1::RemoveAgentResponse* response, Finish finish) {
  engine.lifecycle().Remove(
      request.name(), {.force = request.force(), .delete_home = request.delete_home()},
      [response, delete_home = request.delete_home(),
       finish = std::move(finish)](absl::StatusOr<store::InstanceRow> removed) {
        if (!removed.ok()) {
          finish(removed.status());
          return;
        }
        response->set_name(removed->name);
        response->set_agent_home(removed->home);
        response->set_home_deleted(delete_home);
        finish(absl::OkStatus());
      });
}

}  // namespace ktesio::daemon::api::rpc
