// The kit's ktesio.v1 client: section dispatch and cleanup, registration (the subject itself or
// the probe under a synthesized manifest), start/get/config wrappers and event replay.

#include <unistd.h>

#include <atomic>
#include <sstream>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "kit_internal.h"

namespace ktesio::tck::internal {

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
  SectionResult result{section, kPass, ""};
  Deadline deadline(options_.section_timeout);
  deadline_ = &deadline;
  try {
    std::pair<std::string, std::string> outcome = Dispatch(section);
    result.status = outcome.first;
    result.reason = outcome.second;
  } catch (const Fail& f) {
    result.status = kFail;
    result.reason = f.reason;
  } catch (const std::exception& e) {
    result.status = kFail;
    result.reason = std::string("the section threw: ") + e.what();
  } catch (...) {
    result.status = kFail;
    result.reason = "the section threw an unknown exception";
  }
  Cleanup();
  if (!argv_file_.empty()) unlink(argv_file_.c_str());
  argv_file_.clear();
  provider_.reset();
  deadline_ = nullptr;
  if (result.status == kPass) result.reason.clear();
  return result;
}

Kit::Outcome Kit::Dispatch(const std::string& section) {
  if (section == "capability_edges") return CapabilityEdges();
  if (section == "lifecycle") return Lifecycle();
  if (section == "pause") return Pause();
  if (section == "config_mapping") return ConfigMapping();
  if (section == "metering_self_reported") return MeteringSelfReported();
  if (section == "metering_engine_observed") return MeteringEngineObserved();
  if (section == "memory") return Memory();
  if (section == "interaction") return Interaction();
  return {kFail, "unknown section '" + section + "'"};
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
  if (argv_file_.empty()) {
    m << "[lifecycle.start]\nexec = " << TomlString(options_.probe_path) << "\nargs = [";
    for (size_t i = 0; i < args.size(); ++i) m << (i ? ", " : "") << TomlString(args[i]);
    m << "]\n";
  } else {
    // Flag targets are appended to argv, and the probe refuses unknown flags: a /bin/sh
    // wrapper records the appended tokens ("$@") to argv_file_, then execs the probe (same
    // pid, same environment) without them.
    std::string script = "printf '%s\\0' \"$@\" > '" + argv_file_ + "'; exec \"$0\"";
    for (const std::string& a : args) script += " '" + a + "'";
    m << "[lifecycle.start]\nexec = \"/bin/sh\"\nargs = [\"-c\", " << TomlString(script) << ", "
      << TomlString(options_.probe_path) << "]\n";
  }
  for (c::Capability capability : c::kAllCapabilities) {
    bool any = false;
    for (c::Os os : c::kAllOses) any = any || d_.capabilities.HasEntry(capability, os);
    if (!any) continue;
    m << "[capabilities." << c::CapabilityName(capability) << "]\n";
    for (c::Os os : c::kAllOses) {
      if (d_.capabilities.HasEntry(capability, os)) {
        m << c::OsName(os) << " = "
          << TomlString(Str(c::SupportLevelName(d_.capabilities.Project(capability, os)))) << "\n";
      }
    }
  }
  m << "[metering]\nsource = "
    << TomlString(Str(c::MeteringSourceName(metering.value_or(d_.metering)))) << "\n";
  m << "[interaction]\nchannel = " << TomlString(Str(c::InteractionChannelName(d_.channel)))
    << "\n";
  if (keep_config) {
    for (const auto& [key, target] : d_.config) {
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
    if (out != nullptr) *out = response.instance();
  }
  return status;
}

void Kit::MustRegisterProbe(const std::string& name, const std::vector<std::string>& args,
                            std::optional<c::MeteringSource> metering) {
  grpc::Status status = RegisterManifest(name, ProbeManifest(args, true, metering));
  if (!status.ok()) {
    throw Fail("registering the probe under the subject's declaration failed: " + Describe(status));
  }
}

grpc::Status Kit::RegisterSubject(const std::string& name, v1::RegisterAgentResponse* response) {
  v1::RegisterAgentRequest request;
  request.set_name(name);
  if (!options_.builtin_kind.empty()) {
    request.set_builtin_kind(options_.builtin_kind);
  } else {
    request.mutable_manifest()->set_content(options_.manifest_text);
    request.mutable_manifest()->set_path(options_.manifest_path);
  }
  grpc::Status status = agents_->RegisterAgent(Ctx().get(), request, response);
  if (status.ok()) created_.push_back(name);
  return status;
}

void Kit::MustRegisterSubject(const std::string& name) {
  v1::RegisterAgentResponse response;
  grpc::Status status = RegisterSubject(name, &response);
  if (!status.ok()) throw Fail("registering the subject failed: " + Describe(status));
  if (d_.metering == c::MeteringSource::kEngineObserved) {
    // An engine-observed instance needs an upstream to start; the kit's provider answers any
    // model call the subject makes with a known usage.
    if (!provider_) provider_ = std::make_unique<LoopbackProvider>();
    if (provider_->port() == 0) throw Fail("cannot listen on 127.0.0.1 for the kit's provider");
    MustSetConfig(name, "metering.upstream_base_url",
                  "http://127.0.0.1:" + std::to_string(provider_->port()) + "/v1");
  }
}

void Kit::MustRegisterAgent(const std::string& name, const std::vector<std::string>& probe_args) {
  if (subject_mode()) {
    MustRegisterSubject(name);
  } else {
    MustRegisterProbe(name, probe_args);
  }
}

long long Kit::OutputLines(const std::string& name, std::string* last) {
  v1::ReadLogsRequest request;
  request.mutable_filter()->set_name(name);
  v1::ReadLogsResponse response;
  if (!logs_->ReadLogs(Ctx(milliseconds(5000)).get(), request, &response).ok()) return -1;
  long long count = 0;
  for (const v1::LogLine& line : response.lines()) {
    if (line.stream() == v1::LOG_STREAM_ENGINE) continue;
    ++count;
    if (last != nullptr) *last = line.text();
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

v1::AgentInstance Kit::MustGet(const std::string& name) {
  v1::GetAgentRequest request;
  request.set_name(name);
  v1::GetAgentResponse response;
  grpc::Status status = agents_->GetAgent(Ctx().get(), request, &response);
  if (!status.ok()) throw Fail("GetAgent " + name + " failed: " + Describe(status));
  return response.instance();
}

grpc::Status Kit::Start(const std::string& name, v1::StartAgentResponse* response) {
  v1::StartAgentRequest request;
  request.set_name(name);
  return agents_->StartAgent(Ctx(milliseconds(20000)).get(), request, response);
}

v1::AgentInstance Kit::MustStartRunning(const std::string& name) {
  v1::StartAgentResponse response;
  grpc::Status status = Start(name, &response);
  if (!status.ok()) throw Fail("StartAgent " + name + " failed: " + Describe(status));
  v1::AgentInstance instance;
  bool running = deadline_->WaitFor(
      [&] {
        auto got = Get(name);
        if (got) instance = *got;
        return got && got->state() == v1::AGENT_STATE_RUNNING && got->has_pid();
      },
      milliseconds(15000));
  if (!running) {
    throw Fail("the agent did not reach running after start (state " + StateName(instance.state()) +
               ", cause '" + instance.cause() + "')");
  }
  return instance;
}

void Kit::MustSetConfig(const std::string& name, const std::string& key, const std::string& value) {
  grpc::Status status = SetConfig(name, key, value);
  if (!status.ok()) {
    throw Fail("SetConfig " + key + "=" + value + " failed: " + Describe(status));
  }
}

grpc::Status Kit::SetConfig(const std::string& name, const std::string& key,
                            const std::string& value) {
  v1::SetConfigRequest request;
  request.set_name(name);
  request.set_key(key);
  request.set_value(value);
  v1::SetConfigResponse response;
  return config_->SetConfig(Ctx().get(), request, &response);
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
    if (event.type() != "transition") return false;
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

// A top-level string field of an event payload, read with protobuf's JSON parser (the payload
// is a JSON object): "" when the payload is not an object or the field is absent or not a string.
std::string Kit::JsonField(const std::string& json, const std::string& key) {
  google::protobuf::Struct payload;
  if (!google::protobuf::util::JsonStringToMessage(json, &payload).ok()) {
    return "";
  }
  const auto field = payload.fields().find(key);
  if (field == payload.fields().end() || !field->second.has_string_value()) {
    return "";
  }
  return field->second.string_value();
}

}  // namespace ktesio::tck::internal
