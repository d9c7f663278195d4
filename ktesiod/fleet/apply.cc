#include "fleet/apply.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "config/instance_file.h"
#include "fleet/plan.h"
#include "fleet/validate.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/labels.h"
#include "ktesio/contract/status_macros.h"
#include "supervisor/supervisor.h"

namespace ktesio::daemon::fleet {
namespace {

using engine::Engine;
using Done = std::function<void(absl::Status)>;
using Op = std::function<void(Done)>;

// The state of one Apply call, shared by its pending operations.
struct Run {
  Engine* engine = nullptr;
  v1::ApplyFleetRequest request;  // owned: the plan points into it
  std::vector<Desired> desired;
  std::vector<Step> plan;
  v1::ApplyFleetResponse* response = nullptr;
  Engine::Finish finish;
  size_t pending = 0;

  void StepDone() {
    if (--pending == 0) {
      Finish();
    }
  }
  void Finish() {
    for (v1::PlanStep& step : *response->mutable_steps()) {
      if (step.ok() && !request.dry_run() && !step.actions().empty() &&
          step.actions(0) != v1::PLAN_ACTION_PRUNE) {
        if (absl::StatusOr<v1::AgentInstance> view = engine->instances().View(step.name(), true);
            view.ok()) {
          *step.mutable_instance() = std::move(*view);
        }
      }
    }
    finish(absl::OkStatus());
  }
};

// Runs `ops` one after another; `done` gets the first error or OK after the last.
void RunChain(std::shared_ptr<std::vector<Op>> ops, size_t next, Done done) {
  if (next == ops->size()) {
    done(absl::OkStatus());
    return;
  }
  (*ops)[next]([ops, next, done = std::move(done)](absl::Status status) mutable {
    if (!status.ok()) {
      done(status);
      return;
    }
    RunChain(ops, next + 1, std::move(done));
  });
}

// A lifecycle command's completion as an Op's: its notices are not part of a plan step.
engine::Lifecycle::Done StatusOnly(Done done) {
  return [done = std::move(done)](absl::Status status, auto) { done(status); };
}

Op Register(Engine* engine, const Desired& desired) {
  return [engine, &desired](Done done) {
    v1::RegisterAgentRequest request;
    request.set_name(desired.spec->name());
    if (desired.spec->has_manifest()) {
      *request.mutable_manifest() = desired.spec->manifest();
    } else {
      request.set_builtin_kind(desired.spec->builtin_kind());
    }
    done(engine->instances().Register(request, engine->limits().max_instances).status());
  };
}

Op Configure(Engine* engine, const Step& step) {
  return [engine, &step](Done done) {
    if (absl::Status s = engine->instances().SetLabels(step.name, step.labels); !s.ok()) {
      done(s);
      return;
    }
    for (const auto& [key, value] : step.config_to_set) {
      if (absl::Status s = engine->configuration().Set(step.name, key, value).status(); !s.ok()) {
        done(s);
        return;
      }
    }
    done(absl::OkStatus());
  };
}

Op Start(Engine* engine, const std::string& name) {
  return
      [engine, name](Done done) { engine->lifecycle().Start(name, StatusOnly(std::move(done))); };
}

Op Stop(Engine* engine, const std::string& name, const v1::ApplyFleetRequest& apply) {
  const std::optional<uint32_t> window =
      apply.has_timeout_seconds() ? std::optional<uint32_t>(apply.timeout_seconds()) : std::nullopt;
  return [engine, name, window](Done done) {
    engine->lifecycle().Stop(name, window, StatusOnly(std::move(done)));
  };
}

Op Remove(Engine* engine, const std::string& name) {
  return [engine, name](Done done) {
    // force: a live pruned/recreated instance is stopped first; the home is kept.
    engine->lifecycle().Remove(
        name, {.force = true, .delete_home = false},
        [done = std::move(done)](absl::StatusOr<store::InstanceRow> row) { done(row.status()); });
  };
}

// The operations of one step, in order.
std::vector<Op> OpsFor(Run& run, const Step& step) {
  Engine* engine = run.engine;
  std::vector<Op> ops;
  if (step.Has(v1::PLAN_ACTION_PRUNE)) {
    ops.push_back(Remove(engine, step.name));
    return ops;
  }
  if (step.Has(v1::PLAN_ACTION_RECREATE)) {
    ops.push_back(Remove(engine, step.name));  // stops a live instance first, keeps the home
  }
  if (step.Has(v1::PLAN_ACTION_CREATE) || step.Has(v1::PLAN_ACTION_RECREATE)) {
    ops.push_back(Register(engine, *step.desired));
  }
  if (step.Has(v1::PLAN_ACTION_CREATE) || step.Has(v1::PLAN_ACTION_UPDATE) ||
      step.Has(v1::PLAN_ACTION_RECREATE)) {
    ops.push_back(Configure(engine, step));
  }
  if (step.Has(v1::PLAN_ACTION_STOP)) {
    ops.push_back(Stop(engine, step.name, run.request));
  }
  if (step.Has(v1::PLAN_ACTION_START) || step.restore_running) {
    ops.push_back(Start(engine, step.name));
  }
  return ops;
}

void FillStep(const Step& step, v1::PlanStep* out) {
  out->set_name(step.name);
  for (v1::PlanAction action : step.actions) {
    out->add_actions(action);
  }
  for (const std::string& change : step.changes) {
    out->add_changes(change);
  }
  *out->mutable_location() = step.location;
  out->set_ok(true);
}

void SetError(const absl::Status& status, v1::PlanStep* out) {
  out->set_ok(false);
  const std::string why = contract::ErrorReason(status);
  out->mutable_error()->set_reason(why.empty() ? std::string(contract::reason::kInternal) : why);
  out->mutable_error()->set_message(std::string(status.message()));
}

// The instances as the planner sees them, with their instance-layer config.
absl::StatusOr<std::vector<Current>> ReadCurrent(Engine& engine) {
  KT_ASSIGN_OR_RETURN(std::vector<engine::Instances::Listed> rows, engine.instances().List());
  v1::ListAgentsResponse listed;
  engine.instances().Views(rows, false, &listed);
  std::vector<Current> current;
  for (const v1::AgentInstance& instance : listed.instances()) {
    Current c;
    c.name = instance.name();
    c.state = instance.state();
    c.adapter = instance.adapter();
    c.labels.insert(instance.labels().begin(), instance.labels().end());
    // An unreadable instance file plans every declared key as a change; setting one then
    // reports the file's problem for that instance.
    absl::StatusOr<std::map<std::string, std::string>> config =
        config::instance_file::Load(instance.agent_home());
    if (config.ok()) {
      c.config = std::move(*config);
    }
    current.push_back(std::move(c));
  }
  return current;
}

// Fills each manifest spec's empty content from the request's shared manifests.
void ShareManifests(v1::ApplyFleetRequest* request) {
  for (v1::FleetSpec& fleet : *request->mutable_fleets()) {
    for (v1::FleetInstanceSpec& spec : *fleet.mutable_instances()) {
      if (!spec.has_manifest() || !spec.manifest().content().empty()) {
        continue;
      }
      const auto shared = request->manifests().find(spec.manifest().path());
      if (shared != request->manifests().end()) {
        spec.mutable_manifest()->set_content(shared->second);
      }
    }
  }
  request->clear_manifests();
}

}  // namespace

void Apply(Engine& engine, const v1::ApplyFleetRequest& request, v1::ApplyFleetResponse* response,
           Engine::Finish finish) {
  auto run = std::make_shared<Run>();
  run->engine = &engine;
  run->request = request;
  run->response = response;
  run->finish = std::move(finish);
  ShareManifests(&run->request);
  // The stop window too, before anything: a window the stops would refuse left the steps before
  // the first stop applied.
  if (absl::Status status = supervisor::CheckStopWindow(
          request.has_timeout_seconds() ? std::optional<uint32_t>(request.timeout_seconds())
                                        : std::nullopt);
      !status.ok()) {
    run->finish(status);
    return;
  }
  if (absl::Status status = Validate(run->request, &run->desired); !status.ok()) {
    run->finish(status);
    return;
  }
  absl::StatusOr<std::vector<Current>> current = ReadCurrent(engine);
  if (!current.ok()) {
    run->finish(current.status());
    return;
  }
  std::vector<std::string> fleets;
  for (const v1::FleetSpec& fleet : run->request.fleets()) {
    fleets.push_back(fleet.name());
  }
  run->plan = ComputePlan(run->desired, *current, fleets, run->request.prune());
  if (absl::Status status = CheckLimit(run->plan, current->size(), engine.limits().max_instances);
      !status.ok()) {
    run->finish(status);
    return;
  }
  std::vector<std::pair<size_t, std::vector<Op>>> work;
  for (size_t i = 0; i < run->plan.size(); ++i) {
    const Step& step = run->plan[i];
    v1::PlanStep* out = response->add_steps();
    FillStep(step, out);
    const bool refused = step.Has(v1::PLAN_ACTION_RECREATE) && !run->request.recreate();
    // A plan says whether anything differs (a recreate it may not carry out included); an apply
    // says whether it acted.
    response->set_changed(response->changed() ||
                          (!step.actions.empty() && (run->request.dry_run() || !refused)));
    if (refused) {
      SetError(contract::MakeError(
                   absl::StatusCode::kFailedPrecondition, contract::reason::kInvalidState,
                   absl::StrCat("the adapter of '", step.name,
                                "' changed: apply with --recreate to stop it, register it again "
                                "(keeping its home) and restore its state")),
               out);
      continue;
    }
    if (!run->request.dry_run() && !step.actions.empty()) {
      work.emplace_back(i, OpsFor(*run, step));
    }
  }
  response->set_applied(!run->request.dry_run());
  if (work.empty()) {
    run->finish(absl::OkStatus());
    return;
  }
  run->pending = work.size();
  for (auto& [index, ops] : work) {
    auto chain = std::make_shared<std::vector<Op>>(std::move(ops));
    RunChain(chain, 0, [run, index = index](absl::Status status) {
      if (!status.ok()) {
        SetError(status, run->response->mutable_steps(static_cast<int>(index)));
      }
      run->StepDone();
    });
  }
}

}  // namespace ktesio::daemon::fleet
