// The kit's ktesio.v1 client: section dispatch and cleanup, registration (the subject itself or
// the probe under a synthesized manifest), start/get/config wrappers and event replay.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <sstream>

#include "kit_internal.h"
#include "ktesio/contract/json.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::tck::internal {
namespace {

// A top-level string field of an event payload (a JSON object): "" when the payload is not an
// object or the field is absent or not a string.
std::string JsonField(const std::string& json, std::string_view key) {
  const std::optional<c::json::Value> payload = c::json::Parse(json);
  const c::json::Value* field = payload.has_value() ? payload->Find(key) : nullptr;
  if (field == nullptr || field->kind != c::json::Kind::kString) {
    return "";
  }
  return field->text;
}

// The [capabilities.*] tables of `d`: its declared entries only.
std::string CapabilitiesToml(const c::AdapterDeclaration& d) {
  std::ostringstream m;
  for (c::Capability capability : c::kAllCapabilities) {
    bool any = false;
    for (c::Os os : c::kAllOses) {
      any = any || d.capabilities.HasEntry(capability, os);
    }
    if (!any) {
      continue;
    }
    m << "[capabilities." << c::CapabilityName(capability) << "]\n";
    for (c::Os os : c::kAllOses) {
      if (d.capabilities.HasEntry(capability, os)) {
        m << c::OsName(os) << " = "
          << TomlString(Str(c::SupportLevelName(d.capabilities.Project(capability, os)))) << "\n";
      }
    }
  }
  return m.str();
}

// The [config.*] tables of `d`: its config mapping.
std::string ConfigToml(const c::AdapterDeclaration& d) {
  std::ostringstream m;
  for (const auto& [key, target] : d.config) {
    m << "[config." << TomlString(key) << "]\n";
    switch (target.kind) {
      case c::ConfigTarget::Kind::kEnv:
        m << "env = " << TomlString(target.env) << "\n";
        break;
      case c::ConfigTarget::Kind::kFlag:
        m << "flag = " << TomlString(target.flag) << "\n";
        break;
      case c::ConfigTarget::Kind::kFile:
        m << "file = { path = " << TomlString(target.file_path)
          << ", key = " << TomlString(target.file_key) << " }\n";
        break;
    }
  }
  return m.str();
}

}  // namespace

Kit::Kit(const Options& options, c::AdapterDeclaration declaration)
    : options_(options), d_(std::move(declaration)) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  channel_ = grpc::CreateCustomChannel("unix:" + options.socket_path,
                                       grpc::InsecureChannelCredentials(), args);
  agents_ = v1::AgentService::NewStub(channel_);
  config_ = v1::ConfigService::NewStub(channel_);
  logs_ = v1::LogService::NewStub(channel_);
  events_ = v1::EventService::NewStub(channel_);
}

SectionResult Kit::Run(const std::string& section) {
  SectionResult result{section, kFail, "", ""};
  Deadline deadline(options_.section_timeout);
  deadline_ = &deadline;
  absl::StatusOr<Outcome> outcome = Dispatch(section);
  if (outcome.ok()) {
    result.status = std::move(outcome->first);
    result.reason = std::move(outcome->second);
  } else {
    result.reason = std::string(outcome.status().message());
  }
  Cleanup();
  if (!argv_file_.empty()) {
    unlink(argv_file_.c_str());
  }
  argv_file_.clear();
  provider_.reset();
  deadline_ = nullptr;
  if (result.status == kPass) {
    result.note = std::move(result.reason);  // what the pass could not exercise, if anything
    result.reason.clear();
  }
  return result;
}

absl::StatusOr<Kit::Outcome> Kit::Dispatch(const std::string& section) {
  using SectionFn = absl::StatusOr<Outcome> (Kit::*)();
  static constexpr std::pair<std::string_view, SectionFn> kSections[] = {
      {"capability_edges", &Kit::CapabilityEdges},
      {"lifecycle", &Kit::Lifecycle},
      {"pause", &Kit::Pause},
      {"config_mapping", &Kit::ConfigMapping},
      {"metering_self_reported", &Kit::MeteringSelfReported},
      {"metering_engine_observed", &Kit::MeteringEngineObserved},
      {"memory", &Kit::Memory},
      {"interaction", &Kit::Interaction},
  };
  for (const auto& [id, run] : kSections) {
    if (section == id) {
      return (this->*run)();
    }
  }
  return Outcome{kFail, "unknown section '" + section + "'"};
}

std::string Kit::NewName(const std::string& section) {
  static std::atomic<int> counter{0};
  std::string name = "tck-" + section + "-" + std::to_string(getpid()) + "-" +
                     std::to_string(counter.fetch_add(1));
  return name;
}

std::unique_ptr<grpc::ClientContext> Kit::Ctx(milliseconds cap) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(deadline_->Rpc(cap));
  return ctx;
}

// The synthesized manifest: the subject's declaration with the probe as the program.
std::string Kit::ProbeManifest(const std::vector<std::string>& args, bool keep_config,
                               std::optional<c::MeteringSource> metering) {
  std::ostringstream m;
  m << "contract_version = \"1.0.0\"\n[adapter]\nkind = " << TomlString(d_.kind) << "\n";
  // Flag targets are appended to argv (with their engine defaults too: `restart.policy` is
  // always delivered), and the probe refuses unknown flags.
  const bool flags = keep_config && std::any_of(d_.config.begin(), d_.config.end(), [](auto& kv) {
                       return kv.second.kind == c::ConfigTarget::Kind::kFlag;
                     });
  if (argv_file_.empty() && !flags) {
    m << "[lifecycle.start]\nexec = " << TomlString(options_.probe_path) << "\nargs = [";
    for (size_t i = 0; i < args.size(); ++i) {
      m << (i ? ", " : "") << TomlString(args[i]);
    }
    m << "]\n";
  } else {
    // A /bin/sh wrapper records the appended tokens ("$@") to argv_file_ (config_mapping and
    // memory read them; elsewhere nothing does), then execs the probe (same pid, same
    // environment) without them.
    const std::string record = argv_file_.empty() ? std::string("/dev/null") : argv_file_;
    std::string script = "printf '%s\\0' \"$@\" > '" + record + "'; exec \"$0\"";
    for (const std::string& a : args) {
      script += " '" + a + "'";
    }
    m << "[lifecycle.start]\nexec = \"/bin/sh\"\nargs = [\"-c\", " << TomlString(script) << ", "
      << TomlString(options_.probe_path) << "]\n";
  }
  m << CapabilitiesToml(d_);
  m << "[metering]\nsource = "
    << TomlString(Str(c::MeteringSourceName(metering.value_or(d_.metering)))) << "\n";
  m << "[interaction]\nchannel = " << TomlString(Str(c::InteractionChannelName(d_.channel)))
    << "\n";
  if (keep_config) {
    m << ConfigToml(d_);
  }
  return m.str();
}

void Kit::UseArgvWrapperIfFlags(const std::string& name) {
  for (const auto& [key, target] : d_.config) {
    if (target.kind == c::ConfigTarget::Kind::kFlag) {
      argv_file_ = "/tmp/" + name + ".argv";
      unlink(argv_file_.c_str());
      return;
    }
  }
}

grpc::Status Kit::RegisterManifest(const std::string& name, const std::string& manifest,
                                   v1::AgentInstance* out) {
  v1::RegisterAgentRequest request;
  request.set_name(name);
  request.mutable_manifest()->set_content(manifest);
  request.mutable_manifest()->set_path("tck-synthesized/" + name + "/adapter.toml");
  v1::RegisterAgentResponse response;
  grpc::Status status = agents_->RegisterAgent(Ctx().get(), request, &response);
  if (status.ok()) {
    created_.push_back(name);
    if (out != nullptr) {
      *out = response.instance();
    }
  }
  return status;
}

absl::Status Kit::RegisterProbe(const std::string& name, const std::vector<std::string>& args,
                                std::optional<c::MeteringSource> metering) {
  grpc::Status status = RegisterManifest(name, ProbeManifest(args, true, metering));
  if (!status.ok()) {
    return RpcFailed(status, "registering the probe under the subject's declaration");
  }
  return absl::OkStatus();
}

absl::Status Kit::RegisterSubject(const std::string& name, v1::RegisterAgentResponse* response) {
  v1::RegisterAgentRequest request;
  request.set_name(name);
  if (!options_.builtin_kind.empty()) {
    request.set_builtin_kind(options_.builtin_kind);
  } else {
    request.mutable_manifest()->set_content(options_.manifest_text);
    request.mutable_manifest()->set_path(options_.manifest_path);
  }
  grpc::Status status = agents_->RegisterAgent(Ctx().get(), request, response);
  if (!status.ok()) {
    return RpcFailed(status, "registering the subject");
  }
  created_.push_back(name);
  return absl::OkStatus();
}

absl::Status Kit::RegisterSubjectToRun(const std::string& name) {
  v1::RegisterAgentResponse response;
  KT_RETURN_IF_ERROR(RegisterSubject(name, &response));
  if (d_.metering != c::MeteringSource::kEngineObserved) {
    return absl::OkStatus();
  }
  // An engine-observed instance needs an upstream to start; the kit's provider answers any
  // model call the subject makes with a known usage.
  if (provider_ == nullptr) {
    absl::StatusOr<std::unique_ptr<LoopbackProvider>> provider = LoopbackProvider::Start();
    if (!provider.ok()) {
      return absl::UnavailableError("cannot listen on 127.0.0.1 for the kit's provider");
    }
    provider_ = *std::move(provider);
  }
  return SetConfig(name, "metering.upstream_base_url",
                   "http://127.0.0.1:" + std::to_string(provider_->port()) + "/v1");
}

absl::Status Kit::RegisterAgent(const std::string& name,
                                const std::vector<std::string>& probe_args) {
  if (subject_mode()) {
    return RegisterSubjectToRun(name);
  }
  return RegisterProbe(name, probe_args);
}

long long Kit::OutputLines(const std::string& name, std::string* last) {
  v1::ReadLogsRequest request;
  request.mutable_filter()->set_name(name);
  v1::ReadLogsResponse response;
  if (!logs_->ReadLogs(Ctx(milliseconds(5000)).get(), request, &response).ok()) {
    return -1;
  }
  long long count = 0;
  for (const v1::LogLine& line : response.lines()) {
    if (line.stream() == v1::LOG_STREAM_ENGINE) {
      continue;
    }
    ++count;
    if (last != nullptr) {
      *last = line.text();
    }
  }
  return count;
}

std::optional<v1::AgentInstance> Kit::Get(const std::string& name) {
  v1::GetAgentRequest request;
  request.set_name(name);
  v1::GetAgentResponse response;
  if (!agents_->GetAgent(Ctx(milliseconds(5000)).get(), request, &response).ok()) {
    return std::nullopt;
  }
  return response.instance();
}

absl::StatusOr<v1::AgentInstance> Kit::GetInstance(const std::string& name) {
  v1::GetAgentRequest request;
  request.set_name(name);
  v1::GetAgentResponse response;
  grpc::Status status = agents_->GetAgent(Ctx().get(), request, &response);
  if (!status.ok()) {
    return RpcFailed(status, "GetAgent " + name);
  }
  return response.instance();
}

grpc::Status Kit::Start(const std::string& name, v1::StartAgentResponse* response) {
  v1::StartAgentRequest request;
  request.set_name(name);
  return agents_->StartAgent(Ctx(milliseconds(20000)).get(), request, response);
}

absl::StatusOr<v1::AgentInstance> Kit::StartRunning(const std::string& name) {
  v1::StartAgentResponse response;
  grpc::Status status = Start(name, &response);
  if (!status.ok()) {
    return RpcFailed(status, "StartAgent " + name);
  }
  v1::AgentInstance instance;
  bool running = deadline_->WaitFor(
      [&] {
        auto got = Get(name);
        if (got) {
          instance = *got;
        }
        return got && got->state() == v1::AGENT_STATE_RUNNING && got->has_pid();
      },
      milliseconds(15000));
  if (!running) {
    return absl::DeadlineExceededError("the agent did not reach running after start (state " +
                                       StateName(instance.state()) + ", cause '" +
                                       instance.cause() + "')");
  }
  return instance;
}

absl::Status Kit::Stop(const std::string& name) {
  v1::StopAgentRequest stop;
  stop.set_name(name);
  stop.set_timeout_seconds(5);
  v1::StopAgentResponse stopped;
  grpc::Status status = agents_->StopAgent(Ctx(milliseconds(20000)).get(), stop, &stopped);
  return status.ok() ? absl::OkStatus() : RpcFailed(status, "StopAgent");
}

absl::Status Kit::SetConfig(const std::string& name, const std::string& key,
                            const std::string& value) {
  v1::SetConfigRequest request;
  request.set_name(name);
  request.set_key(key);
  request.set_value(value);
  v1::SetConfigResponse response;
  grpc::Status status = config_->SetConfig(Ctx().get(), request, &response);
  if (!status.ok()) {
    return RpcFailed(status, "SetConfig " + key + "=" + value);
  }
  return absl::OkStatus();
}

void Kit::Cleanup() {
  for (const std::string& name : created_) {
    v1::RemoveAgentRequest request;
    request.set_name(name);
    request.set_force(true);
    request.set_delete_home(true);
    v1::RemoveAgentResponse response;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(15));
    agents_->RemoveAgent(&ctx, request, &response);  // best effort
  }
  created_.clear();
}

// Transition events of `name` (new_state values, and the first prior_state), replayed from 0.
std::vector<std::pair<std::string, std::string>> Kit::Transitions(const std::string& name,
                                                                  const std::string& until) {
  std::vector<std::pair<std::string, std::string>> out;
  WatchEvents(name, milliseconds(5000), [&](const v1::Event& event) {
    if (event.type() != "transition") {
      return false;
    }
    out.emplace_back(JsonField(event.payload_json(), "prior_state"),
                     JsonField(event.payload_json(), "new_state"));
    return out.back().second == until;
  });
  return out;
}

bool Kit::WatchEvents(const std::string& name, milliseconds cap,
                      const std::function<bool(const v1::Event&)>& seen) {
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline_->Rpc(cap));
  v1::SubscribeEventsRequest request;
  request.set_since_cursor(0);
  request.set_instance(name);
  auto reader = events_->SubscribeEvents(&ctx, request);
  v1::SubscribeEventsResponse response;
  bool done = false;
  while (!done && reader->Read(&response)) {
    for (const v1::Event& event : response.events()) {
      if (event.instance() == name && seen(event)) {
        done = true;
        break;
      }
    }
  }
  ctx.TryCancel();
  reader->Finish();  // a cancelled or expired stream is expected here
  return done;
}

}  // namespace ktesio::tck::internal
