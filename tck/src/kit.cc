#include "ktesio/tck/kit.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "ktesio/contract/adapter.h"
#include "ktesio/contract/declaration.h"
#include "ktesio/contract/json_writer.h"
#include "ktesio/contract/manifest.h"
#include "ktesio/v1/agent.grpc.pb.h"
#include "ktesio/v1/common.pb.h"
#include "ktesio/v1/config.grpc.pb.h"
#include "ktesio/v1/events.grpc.pb.h"
#include "ktesio/v1/logs.grpc.pb.h"
#include "loopback_http.h"

namespace ktesio::tck {
namespace {

namespace c = ::ktesio::contract;
namespace v1 = ::ktesio::v1;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kPass[] = "pass";
constexpr char kFail[] = "fail";
constexpr char kNotApplicable[] = "not_applicable";

// ---------------------------------------------------------------------------------------------
// Small helpers

std::string Str(std::string_view s) { return std::string(s); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string ErrorReason(const grpc::Status& status) {
  v1::ErrorDetail detail;
  if (!status.error_details().empty() && detail.ParseFromString(status.error_details())) {
    return detail.reason();
  }
  return "";
}

std::string CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::OK:
      return "OK";
    case grpc::CANCELLED:
      return "CANCELLED";
    case grpc::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::INTERNAL:
      return "INTERNAL";
    case grpc::UNAVAILABLE:
      return "UNAVAILABLE";
    default:
      return "code " + std::to_string(static_cast<int>(code));
  }
}

std::string Describe(const grpc::Status& status) {
  std::string reason = ErrorReason(status);
  return CodeName(status.error_code()) + (reason.empty() ? "" : "/" + reason) + ": " +
         status.error_message();
}

std::string StateName(v1::AgentState state) {
  std::string name = v1::AgentState_Name(state);
  const std::string prefix = "AGENT_STATE_";
  if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return name;
}

std::string LevelName(v1::SupportLevel level) {
  switch (level) {
    case v1::SUPPORT_LEVEL_UNSUPPORTED:
      return "unsupported";
    case v1::SUPPORT_LEVEL_BEST_EFFORT:
      return "best-effort";
    case v1::SUPPORT_LEVEL_GUARANTEED:
      return "guaranteed";
    default:
      return "unspecified";
  }
}

v1::SupportLevel ToProto(c::SupportLevel level) {
  switch (level) {
    case c::SupportLevel::kUnsupported:
      return v1::SUPPORT_LEVEL_UNSUPPORTED;
    case c::SupportLevel::kBestEffort:
      return v1::SUPPORT_LEVEL_BEST_EFFORT;
    case c::SupportLevel::kGuaranteed:
      return v1::SUPPORT_LEVEL_GUARANTEED;
  }
  return v1::SUPPORT_LEVEL_UNSPECIFIED;
}

// "pause.linux = \"unsupported\" (declared)" or "pause.linux: no entry (projects to unsupported)".
std::string QuoteDeclared(const c::AdapterDeclaration& d, c::Capability capability, c::Os os) {
  std::string key = Str(c::CapabilityName(capability)) + "." + Str(c::OsName(os));
  if (!d.capabilities.HasEntry(capability, os)) {
    return key + ": no entry (projects to unsupported)";
  }
  return key + " = \"" + Str(c::SupportLevelName(d.capabilities.Project(capability, os))) +
         "\" (declared)";
}

// /proc/<pid>/stat state letter, or 0 when the process is gone.
char ProcState(long long pid) {
  std::string text = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return 0;
  return text[paren + 2];
}

bool ProcessGone(long long pid) {
  if (pid <= 0) return true;
  if (kill(static_cast<pid_t>(pid), 0) != 0) return true;
  char state = ProcState(pid);
  return state == 0 || state == 'Z' || state == 'X';
}

std::string TomlString(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += ch;
    }
  }
  return out + "\"";
}

// A bounded section: every wait stops at the section deadline.
class Deadline {
 public:
  explicit Deadline(std::chrono::seconds budget) : end_(Clock::now() + budget) {}
  bool Expired() const { return Clock::now() >= end_; }
  // A gRPC deadline: at most `cap`, never past the section deadline.
  std::chrono::system_clock::time_point Rpc(milliseconds cap = milliseconds(10000)) const {
    auto left = std::chrono::duration_cast<milliseconds>(end_ - Clock::now());
    if (left < milliseconds(200)) left = milliseconds(200);
    return std::chrono::system_clock::now() + std::min(left, cap);
  }
  // Polls `condition` every 50 ms for at most `cap`.
  bool WaitFor(const std::function<bool()>& condition, milliseconds cap) const {
    const auto end = std::min(end_, Clock::now() + cap);
    while (true) {
      if (condition()) return true;
      if (Clock::now() >= end) return false;
      std::this_thread::sleep_for(milliseconds(50));
    }
  }

 private:
  Clock::time_point end_;
};

struct Fail : std::exception {
  explicit Fail(std::string r) : reason(std::move(r)) {}
  const char* what() const noexcept override { return reason.c_str(); }
  std::string reason;
};

// ---------------------------------------------------------------------------------------------
// The kit

class Kit {
 public:
  Kit(const Options& options, c::AdapterDeclaration declaration)
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

  SectionResult Run(const std::string& section) {
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
    deadline_ = nullptr;
    if (result.status == kPass) result.reason.clear();
    return result;
  }

 private:
  using Outcome = std::pair<std::string, std::string>;

  Outcome Dispatch(const std::string& section) {
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

  // --- API wrappers -----------------------------------------------------------------------

  std::string NewName(const std::string& section) {
    static std::atomic<int> counter{0};
    std::string name = "tck-" + section + "-" + std::to_string(getpid()) + "-" +
                       std::to_string(counter.fetch_add(1));
    return name;
  }

  std::unique_ptr<grpc::ClientContext> Ctx(milliseconds cap = milliseconds(10000)) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(deadline_->Rpc(cap));
    return ctx;
  }

  // The synthesized manifest: the subject's declaration with the probe as the program.
  std::string ProbeManifest(const std::vector<std::string>& args, bool keep_config = true,
                            std::optional<c::MeteringSource> metering = std::nullopt) {
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
            << TomlString(Str(c::SupportLevelName(d_.capabilities.Project(capability, os))))
            << "\n";
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

  void UseArgvWrapperIfFlags(const std::string& name) {
    for (const auto& [key, target] : d_.config) {
      if (target.kind == c::ConfigTarget::Kind::kFlag) {
        argv_file_ = "/tmp/" + name + ".argv";
        unlink(argv_file_.c_str());
        return;
      }
    }
  }

  grpc::Status RegisterManifest(const std::string& name, const std::string& manifest,
                                v1::AgentInstance* out = nullptr) {
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

  void MustRegisterProbe(
      const std::string& name, const std::vector<std::string>& args,
      std::optional<c::MeteringSource> metering = c::MeteringSource::kSelfReported) {
    grpc::Status status = RegisterManifest(name, ProbeManifest(args, true, metering));
    if (!status.ok()) {
      throw Fail("registering the probe under the subject's declaration failed: " +
                 Describe(status));
    }
  }

  std::optional<v1::AgentInstance> Get(const std::string& name) {
    v1::GetAgentRequest request;
    request.set_name(name);
    v1::GetAgentResponse response;
    if (!agents_->GetAgent(Ctx(milliseconds(5000)).get(), request, &response).ok()) {
      return std::nullopt;
    }
    return response.instance();
  }

  v1::AgentInstance MustGet(const std::string& name) {
    v1::GetAgentRequest request;
    request.set_name(name);
    v1::GetAgentResponse response;
    grpc::Status status = agents_->GetAgent(Ctx().get(), request, &response);
    if (!status.ok()) throw Fail("GetAgent " + name + " failed: " + Describe(status));
    return response.instance();
  }

  grpc::Status Start(const std::string& name, v1::StartAgentResponse* response) {
    v1::StartAgentRequest request;
    request.set_name(name);
    return agents_->StartAgent(Ctx(milliseconds(20000)).get(), request, response);
  }

  v1::AgentInstance MustStartRunning(const std::string& name) {
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
      throw Fail("the probe did not reach running after start (state " +
                 StateName(instance.state()) + ", cause '" + instance.cause() + "')");
    }
    return instance;
  }

  void MustSetConfig(const std::string& name, const std::string& key, const std::string& value) {
    grpc::Status status = SetConfig(name, key, value);
    if (!status.ok()) {
      throw Fail("SetConfig " + key + "=" + value + " failed: " + Describe(status));
    }
  }

  grpc::Status SetConfig(const std::string& name, const std::string& key,
                         const std::string& value) {
    v1::SetConfigRequest request;
    request.set_name(name);
    request.set_key(key);
    request.set_value(value);
    v1::SetConfigResponse response;
    return config_->SetConfig(Ctx().get(), request, &response);
  }

  void Cleanup() {
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

  // --- sections ---------------------------------------------------------------------------

  Outcome CapabilityEdges() {
    const std::string name = NewName("capability_edges");
    v1::RegisterAgentRequest request;
    request.set_name(name);
    if (!options_.builtin_kind.empty()) {
      request.set_builtin_kind(options_.builtin_kind);
    } else {
      request.mutable_manifest()->set_content(options_.manifest_text);
      request.mutable_manifest()->set_path(options_.manifest_path);
    }
    v1::RegisterAgentResponse registered;
    grpc::Status status = agents_->RegisterAgent(Ctx().get(), request, &registered);
    if (!status.ok()) return {kFail, "registering the subject failed: " + Describe(status)};
    created_.push_back(name);
    v1::AgentInstance instance = MustGet(name);
    std::vector<std::string> problems;
    if (instance.kind() != d_.kind) {
      problems.push_back("kind persisted as '" + instance.kind() + "', declared '" + d_.kind + "'");
    }
    for (c::Capability capability : c::kAllCapabilities) {
      const v1::CapabilityLevels& levels = capability == c::Capability::kPause
                                               ? instance.capabilities().pause()
                                               : instance.capabilities().interaction();
      for (c::Os os : c::kAllOses) {
        v1::SupportLevel got = os == c::Os::kLinux   ? levels.on_linux()
                               : os == c::Os::kMacos ? levels.on_macos()
                                                     : levels.on_windows();
        const std::string key = Str(c::CapabilityName(capability)) + "." + Str(c::OsName(os));
        if (d_.capabilities.HasEntry(capability, os)) {
          v1::SupportLevel want = ToProto(d_.capabilities.Project(capability, os));
          if (got != want) {
            problems.push_back(key + " persisted as " + LevelName(got) + ", declared " +
                               LevelName(want));
          }
        } else if (got != v1::SUPPORT_LEVEL_UNSPECIFIED && got != v1::SUPPORT_LEVEL_UNSUPPORTED) {
          problems.push_back(key + " has no entry but persisted as " + LevelName(got) +
                             " (must be unsupported/unspecified)");
        }
      }
    }
    const c::Os here = c::CurrentOs();
    if (instance.projected().os() != Str(c::OsName(here))) {
      problems.push_back("projected.os is '" + instance.projected().os() + "', expected '" +
                         Str(c::OsName(here)) + "'");
    }
    v1::SupportLevel want_pause = ToProto(d_.capabilities.Project(c::Capability::kPause, here));
    v1::SupportLevel want_inter =
        ToProto(d_.capabilities.Project(c::Capability::kInteraction, here));
    if (instance.projected().pause() != want_pause) {
      problems.push_back("projected pause is " + LevelName(instance.projected().pause()) +
                         ", declaration projects " + LevelName(want_pause));
    }
    if (instance.projected().interaction() != want_inter) {
      problems.push_back("projected interaction is " +
                         LevelName(instance.projected().interaction()) + ", declaration projects " +
                         LevelName(want_inter));
    }
    v1::MeteringSource want_source = d_.metering == c::MeteringSource::kSelfReported
                                         ? v1::METERING_SOURCE_SELF_REPORTED
                                         : v1::METERING_SOURCE_ENGINE_OBSERVED;
    if (instance.metering_source() != want_source) {
      problems.push_back("metering source persisted differently from the declaration");
    }
    // The persisted config mapping equals the declared one.
    const auto& persisted = instance.adapter().config();
    if (static_cast<size_t>(persisted.size()) != d_.config.size()) {
      problems.push_back("persisted config mapping has " + std::to_string(persisted.size()) +
                         " keys, declared " + std::to_string(d_.config.size()));
    }
    for (const auto& [key, target] : d_.config) {
      auto it = persisted.find(key);
      if (it == persisted.end()) {
        problems.push_back("config key '" + key + "' missing from the persisted snapshot");
        continue;
      }
      const v1::ConfigTarget& t = it->second;
      bool same = (target.kind == c::ConfigTarget::Kind::kEnv && t.env() == target.env) ||
                  (target.kind == c::ConfigTarget::Kind::kFlag && t.flag() == target.flag) ||
                  (target.kind == c::ConfigTarget::Kind::kFile &&
                   t.file().path() == target.file_path && t.file().key() == target.file_key);
      if (!same) problems.push_back("config key '" + key + "' persisted with another target");
    }
    if (!problems.empty()) return {kFail, Join(problems)};
    return {kPass, ""};
  }

  static std::string Join(const std::vector<std::string>& parts) {
    std::string out;
    for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
    return out;
  }

  // Transition events of `name` (new_state values, and the first prior_state), replayed from 0.
  std::vector<std::pair<std::string, std::string>> Transitions(const std::string& name,
                                                               const std::string& until) {
    std::vector<std::pair<std::string, std::string>> out;
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_->Rpc(milliseconds(5000)));
    v1::SubscribeEventsRequest request;
    request.set_since_cursor(0);
    request.set_instance(name);
    auto reader = events_->SubscribeEvents(&ctx, request);
    v1::SubscribeEventsResponse response;
    bool done = false;
    while (!done && reader->Read(&response)) {
      for (const v1::Event& event : response.events()) {
        if (event.type() != "transition" || event.instance() != name) continue;
        out.emplace_back(JsonField(event.payload_json(), "prior_state"),
                         JsonField(event.payload_json(), "new_state"));
        if (out.back().second == until) done = true;
      }
    }
    ctx.TryCancel();
    reader->Finish();
    return out;
  }

  static std::string JsonField(const std::string& json, const std::string& key) {
    const std::string needle = "\"" + key + "\":\"";
    size_t at = json.find(needle);
    if (at == std::string::npos) return "";
    at += needle.size();
    size_t end = json.find('"', at);
    return end == std::string::npos ? "" : json.substr(at, end - at);
  }

  Outcome Lifecycle() {
    const std::string name = NewName("lifecycle");
    MustRegisterProbe(name, {"--heartbeat-ms", "1000"});
    v1::AgentInstance running = MustStartRunning(name);
    const long long pid = running.pid();
    v1::StopAgentRequest stop;
    stop.set_name(name);
    stop.set_timeout_seconds(5);
    v1::StopAgentResponse stopped;
    grpc::Status status = agents_->StopAgent(Ctx(milliseconds(20000)).get(), stop, &stopped);
    if (!status.ok()) return {kFail, "StopAgent failed: " + Describe(status)};
    v1::AgentInstance after;
    if (!deadline_->WaitFor(
            [&] {
              auto got = Get(name);
              if (got) after = *got;
              return got && got->state() == v1::AGENT_STATE_STOPPED;
            },
            milliseconds(10000))) {
      return {kFail, "after stop the state is " + StateName(after.state()) + ", not stopped"};
    }
    if (!deadline_->WaitFor([&] { return ProcessGone(pid); }, milliseconds(5000))) {
      return {kFail, "the agent pid " + std::to_string(pid) + " is still alive after stop"};
    }
    auto transitions = Transitions(name, "stopped");
    const std::vector<std::string> want = {"starting", "running", "stopping", "stopped"};
    std::string seen;
    size_t next = 0;
    for (const auto& [prior, now] : transitions) {
      seen += (seen.empty() ? "" : ",") + prior + "->" + now;
      if (next < want.size() && now == want[next]) ++next;
    }
    if (transitions.empty() || transitions.front().first != "registered" || next != want.size()) {
      return {kFail,
              "transition events do not show registered->starting->running->stopping->"
              "stopped (seen: " +
                  (seen.empty() ? std::string("none") : seen) + ")"};
    }
    // Crash leg: an unrequested exit with restart.policy=never ends in failed, no restart.
    const std::string crash = NewName("lifecycle");
    MustRegisterProbe(crash, {"--crash-after-ms", "500", "--exit-code", "3"});
    MustSetConfig(crash, "restart.policy", "never");
    v1::StartAgentResponse started;
    status = Start(crash, &started);
    if (!status.ok()) return {kFail, "StartAgent (crash leg) failed: " + Describe(status)};
    v1::AgentInstance failed;
    if (!deadline_->WaitFor(
            [&] {
              auto got = Get(crash);
              if (got) failed = *got;
              return got && got->state() == v1::AGENT_STATE_FAILED;
            },
            milliseconds(10000))) {
      return {kFail, "crash leg: the crashing probe did not end in failed (state " +
                         StateName(failed.state()) + ", cause '" + failed.cause() + "')"};
    }
    std::string cause = failed.failed_cause().empty() ? failed.cause() : failed.failed_cause();
    if (cause.find("crashed") == std::string::npos) {
      return {kFail, "crash leg: failed with cause '" + cause + "', expected crashed{...}"};
    }
    // Give a (wrong) restart a moment to show up before checking the count.
    std::this_thread::sleep_for(milliseconds(1500));
    v1::AgentInstance later = MustGet(crash);
    if (later.restart_count() != 0 || later.state() != v1::AGENT_STATE_FAILED) {
      return {kFail, "crash leg: restart.policy=never but restart_count is " +
                         std::to_string(later.restart_count()) + " and state " +
                         StateName(later.state())};
    }
    return {kPass, ""};
  }

  Outcome Pause() {
    const c::Os here = c::CurrentOs();
    const c::SupportLevel level = d_.capabilities.Project(c::Capability::kPause, here);
    const std::string quoted = QuoteDeclared(d_, c::Capability::kPause, here);
    const std::string name = NewName("pause");
    MustRegisterProbe(name, {"--heartbeat-ms", "1000"});
    v1::AgentInstance running = MustStartRunning(name);
    const long long pid = running.pid();
    v1::PauseAgentRequest pause;
    pause.set_name(name);
    v1::PauseAgentResponse paused;
    grpc::Status status = agents_->PauseAgent(Ctx().get(), pause, &paused);
    if (level == c::SupportLevel::kUnsupported) {
      if (status.ok()) return {kFail, "PauseAgent succeeded although " + quoted};
      if (status.error_code() != grpc::FAILED_PRECONDITION ||
          ErrorReason(status) != "CAPABILITY_UNSUPPORTED") {
        return {kFail, "PauseAgent refused with " + Describe(status) +
                           ", expected FAILED_PRECONDITION/CAPABILITY_UNSUPPORTED"};
      }
      return {kNotApplicable, quoted + "; PauseAgent fails fast with CAPABILITY_UNSUPPORTED"};
    }
    if (!status.ok())
      return {kFail, "PauseAgent failed although " + quoted + ": " + Describe(status)};
    v1::ResumeAgentRequest resume;
    resume.set_name(name);
    v1::ResumeAgentResponse resumed;
    if (level == c::SupportLevel::kGuaranteed) {
      if (!deadline_->WaitFor([&] { return ProcState(pid) == 'T'; }, milliseconds(5000))) {
        return {kFail, std::string("paused with ") + quoted + " but /proc/" + std::to_string(pid) +
                           "/stat shows state '" + ProcState(pid) + "', not 'T' (stopped)"};
      }
      status = agents_->ResumeAgent(Ctx().get(), resume, &resumed);
      if (!status.ok()) return {kFail, "ResumeAgent failed: " + Describe(status)};
      if (!deadline_->WaitFor([&] { return ProcState(pid) != 'T'; }, milliseconds(5000))) {
        return {kFail, "after ResumeAgent the agent is still stopped ('T')"};
      }
      return {kPass, ""};
    }
    v1::AgentInstance instance = MustGet(name);
    if (instance.state() != v1::AGENT_STATE_PAUSED ||
        instance.cause().find("pause-best-effort") == std::string::npos) {
      return {kFail, "best-effort pause: state " + StateName(instance.state()) + " cause '" +
                         instance.cause() + "', expected paused with cause pause-best-effort"};
    }
    status = agents_->ResumeAgent(Ctx().get(), resume, &resumed);
    if (!status.ok())
      return {kFail, "ResumeAgent after a best-effort pause failed: " + Describe(status)};
    return {kPass, ""};
  }

  // A value the daemon accepts for `key`, distinctive enough to find; nullopt = unknown.
  static std::optional<std::string> ValueFor(const std::string& key, int n) {
    const std::string tag = std::to_string(n);
    if (key == "model" || key.rfind("agent.", 0) == 0) return "tck-" + tag;
    if (key == "budget.tokens.per_run") return "123450" + tag;
    if (key == "budget.tokens.cumulative") return "987650" + tag;
    if (key == "restart.policy") return "never";
    if (key == "logs.keep") return "7";
    if (key == "logs.max_bytes") return "654321";
    if (key == "restart.backoff_initial_ms") return "1234";
    if (key == "restart.backoff_max_ms") return "65432";
    if (key == "restart.max_consecutive") return "17";
    if (key == "restart.reset_after_ms") return "76543";
    if (key == "budget.breach_action") return "warn";
    if (key == "autostart") return "false";
    return std::nullopt;
  }

  struct Delivery {
    std::string environ;
    std::vector<std::string> argv;
    std::string home;
  };

  Delivery ReadDelivery(const v1::AgentInstance& instance) {
    Delivery out;
    const std::string proc = "/proc/" + std::to_string(instance.pid());
    out.environ = ReadFile(proc + "/environ");
    std::string cmdline = ReadFile(proc + "/cmdline");
    std::string word;
    for (char ch : cmdline) {
      if (ch == '\0') {
        out.argv.push_back(word);
        word.clear();
      } else {
        word += ch;
      }
    }
    if (!argv_file_.empty()) {
      std::string recorded;
      deadline_->WaitFor(
          [&] {
            recorded = ReadFile(argv_file_);
            return !recorded.empty() || access(argv_file_.c_str(), F_OK) == 0;
          },
          milliseconds(5000));
      out.argv.clear();
      std::string token;
      for (char ch : recorded) {
        if (ch == '\0') {
          out.argv.push_back(token);
          token.clear();
        } else {
          token += ch;
        }
      }
      unlink(argv_file_.c_str());
    }
    out.home = instance.agent_home();
    if (out.environ.empty() && out.argv.empty()) {
      throw Fail("cannot read " + proc +
                 "/environ and cmdline (the kit must run as the daemon's "
                 "user on the daemon's host)");
    }
    return out;
  }

  // Empty when `value` reached `target`, else what went wrong.
  static std::string CheckDelivered(const Delivery& got, const std::string& key,
                                    const c::ConfigTarget& target, const std::string& value) {
    switch (target.kind) {
      case c::ConfigTarget::Kind::kEnv: {
        const std::string want = target.env + "=" + value;
        std::string entry;
        for (char ch : got.environ + '\0') {
          if (ch == '\0') {
            if (entry == want) return "";
            entry.clear();
          } else {
            entry += ch;
          }
        }
        return key + " -> env " + target.env + " not delivered (expected " + want + ")";
      }
      case c::ConfigTarget::Kind::kFlag:
        for (size_t i = 0; i + 1 < got.argv.size(); ++i) {
          if (got.argv[i] == target.flag && got.argv[i + 1] == value) return "";
        }
        return key + " -> flag " + target.flag + " " + value + " not adjacent in argv";
      case c::ConfigTarget::Kind::kFile: {
        const std::string path = got.home + "/" + target.file_path;
        std::string text = ReadFile(path);
        if (text.find(value) != std::string::npos) return "";
        return key + " -> file " + target.file_path + " (key " + target.file_key +
               ") does not carry '" + value + "'";
      }
    }
    return "unknown target";
  }

  Outcome ConfigMapping() {
    const std::string name = NewName("config_mapping");
    UseArgvWrapperIfFlags(name);
    MustRegisterProbe(name, {"--heartbeat-ms", "1000"});
    static std::atomic<int> n{1000};
    std::map<std::string, std::string> set;
    std::vector<std::string> skipped;
    for (const auto& [key, target] : d_.config) {
      if (key == "memory.dir" || key == "metering.base_url") continue;  // engine-reserved
      std::optional<std::string> value = ValueFor(key, n.fetch_add(1));
      if (!value) {
        value = "tck-" + std::to_string(n.fetch_add(1));
        if (!SetConfig(name, key, *value).ok()) {
          skipped.push_back(key);
          continue;
        }
      } else {
        MustSetConfig(name, key, *value);
      }
      set[key] = *value;
    }
    MustSetConfig(name, "agent.KTESIO_TCK_PASSTHROUGH", "tck-pass");
    v1::AgentInstance running = MustStartRunning(name);
    Delivery got = ReadDelivery(running);
    std::vector<std::string> problems;
    for (const auto& [key, value] : set) {
      const c::ConfigTarget& target = d_.config.at(key);
      // agent.* keys the adapter maps explicitly go to the mapping; unmapped ones pass through.
      std::string problem = CheckDelivered(got, key, target, value);
      if (!problem.empty()) problems.push_back(problem);
    }
    if (d_.config.count("agent.KTESIO_TCK_PASSTHROUGH") == 0) {
      c::ConfigTarget pass;
      pass.kind = c::ConfigTarget::Kind::kEnv;
      pass.env = "KTESIO_TCK_PASSTHROUGH";
      std::string problem = CheckDelivered(got, "agent.KTESIO_TCK_PASSTHROUGH", pass, "tck-pass");
      if (!problem.empty()) problems.push_back(problem);
    }
    if (!problems.empty()) {
      if (!skipped.empty()) problems.push_back("not exercised: " + Join(skipped));
      return {kFail, Join(problems)};
    }
    return {kPass, ""};
  }

  Outcome MeteringSelfReported() {
    if (d_.metering != c::MeteringSource::kSelfReported) {
      return {kNotApplicable,
              "source = \"" + Str(c::MeteringSourceName(d_.metering)) + "\" (declared)"};
    }
    const std::string name = NewName("metering_self_reported");
    MustRegisterProbe(name, {"--usage-lines", "20", "--usage-input", "7", "--usage-output", "11",
                             "--usage-replay", "--heartbeat-ms", "1000"});
    MustStartRunning(name);
    auto usage = [&]() -> std::pair<uint64_t, uint64_t> {
      v1::GetUsageRequest request;
      request.set_name(name);
      v1::GetUsageResponse response;
      if (!agents_->GetUsage(Ctx(milliseconds(5000)).get(), request, &response).ok()) {
        return {0, 0};
      }
      return {response.usage().cumulative_input_tokens(),
              response.usage().cumulative_output_tokens()};
    };
    std::pair<uint64_t, uint64_t> got{0, 0};
    bool reached = deadline_->WaitFor(
        [&] {
          got = usage();
          return got.first >= 140 && got.second >= 220;
        },
        milliseconds(10000));
    auto text = [](std::pair<uint64_t, uint64_t> u) {
      return std::to_string(u.first) + "/" + std::to_string(u.second);
    };
    if (!reached) {
      return {kFail, "20 usage lines of 7/11 tokens: cumulative usage is " + text(got) +
                         ", expected 140/220"};
    }
    std::this_thread::sleep_for(milliseconds(1500));
    got = usage();
    if (got.first != 140 || got.second != 220) {
      return {kFail, "cumulative usage is " + text(got) +
                         ", expected exactly 140/220 (the replayed line must not count)"};
    }
    return {kPass, ""};
  }

  Outcome MeteringEngineObserved() {
    if (d_.metering != c::MeteringSource::kEngineObserved) {
      return {kNotApplicable,
              "source = \"" + Str(c::MeteringSourceName(d_.metering)) + "\" (declared)"};
    }
    // The kit is the provider: a known usage per call, and one call with none.
    LoopbackProvider provider;
    if (provider.port() == 0) throw Fail("cannot listen on 127.0.0.1 for the kit's provider");
    const std::string name = NewName("metering_engine_observed");
    UseArgvWrapperIfFlags(name);
    MustRegisterProbe(name, {"--heartbeat-ms", "1000"}, c::MeteringSource::kEngineObserved);
    MustSetConfig(name, "metering.upstream_base_url",
                  "http://127.0.0.1:" + std::to_string(provider.port()) + "/v1");
    const v1::AgentInstance running = MustStartRunning(name);
    const std::string url = running.proxy_url();
    if (url.empty()) return {kFail, "a running engine-observed instance has no proxy_url"};
    if (auto mapping = d_.config.find("metering.base_url"); mapping != d_.config.end()) {
      const std::string problem =
          CheckDelivered(ReadDelivery(running), "metering.base_url", mapping->second, url);
      if (!problem.empty()) return {kFail, problem};
    }
    std::string error;
    for (const char* model : {"tck-usage", "tck-no-usage"}) {
      const int status = LoopbackPost(url + "/chat/completions",
                                      std::string(R"({"model":")") + model + "\"}", &error);
      if (status != 200) {
        return {kFail, "a call through the proxy answered " +
                           (status < 0 ? error : "HTTP " + std::to_string(status))};
      }
    }
    const std::vector<std::string> targets = provider.Targets();
    if (targets.size() != 2 || targets[0] != "/v1/chat/completions") {
      return {kFail,
              "the provider did not receive the calls at the upstream path "
              "/v1/chat/completions"};
    }
    v1::UsageView usage;
    const bool reached = deadline_->WaitFor(
        [&] {
          v1::GetUsageRequest request;
          request.set_name(name);
          v1::GetUsageResponse response;
          if (!agents_->GetUsage(Ctx(milliseconds(5000)).get(), request, &response).ok()) {
            return false;
          }
          usage = response.usage();
          return usage.cumulative_input_tokens() >= LoopbackProvider::kInputTokens &&
                 usage.unknown_usage_calls() >= 1;
        },
        milliseconds(10000));
    const std::string seen = std::to_string(usage.cumulative_input_tokens()) + "/" +
                             std::to_string(usage.cumulative_output_tokens()) + " with " +
                             std::to_string(usage.unknown_usage_calls()) + " unknown";
    if (!reached || usage.cumulative_input_tokens() != LoopbackProvider::kInputTokens ||
        usage.cumulative_output_tokens() != LoopbackProvider::kOutputTokens ||
        usage.unknown_usage_calls() != 1) {
      return {kFail, "after one call reporting 123/45 and one reporting nothing, usage is " + seen +
                         " (expected exactly 123/45 with 1 unknown)"};
    }
    return {kPass, ""};
  }

  Outcome Memory() {
    const std::string name = NewName("memory");
    UseArgvWrapperIfFlags(name);
    MustRegisterProbe(name, {"--heartbeat-ms", "1000"});
    v1::AttachMemoryRequest attach;
    attach.set_name(name);
    attach.set_kind(v1::MEMORY_KIND_FILESYSTEM);
    v1::AttachMemoryResponse attached;
    grpc::Status status = agents_->AttachMemory(Ctx().get(), attach, &attached);
    if (!status.ok()) return {kFail, "AttachMemory filesystem failed: " + Describe(status)};
    const v1::MemoryBacking& memory = attached.memory();
    if (memory.kind() != v1::MEMORY_KIND_FILESYSTEM ||
        memory.guarantee() != v1::MEMORY_GUARANTEE_MANAGED_DIR_BYTE_DURABLE) {
      return {kFail, "AttachMemory filesystem answered kind " + v1::MemoryKind_Name(memory.kind()) +
                         " guarantee " + v1::MemoryGuarantee_Name(memory.guarantee()) +
                         ", expected FILESYSTEM / MANAGED_DIR_BYTE_DURABLE"};
    }
    auto mapping = d_.config.find("memory.dir");
    const bool mapped = mapping != d_.config.end();
    if (memory.declared() != mapped) {
      return {kFail, std::string("memory.declared is ") + (memory.declared() ? "true" : "false") +
                         " but memory.dir is " + (mapped ? "" : "not ") +
                         "mapped by the declaration"};
    }
    if (mapped) {
      v1::AgentInstance running = MustStartRunning(name);
      const std::string want = running.agent_home() + "/memory";
      if (!memory.dir().empty() && memory.dir() != want) {
        return {kFail, "memory dir is '" + memory.dir() + "', expected '" + want + "'"};
      }
      Delivery got = ReadDelivery(running);
      std::string problem = CheckDelivered(got, "memory.dir", mapping->second, want);
      if (!problem.empty()) return {kFail, problem};
      v1::StopAgentRequest stop;
      stop.set_name(name);
      stop.set_timeout_seconds(5);
      v1::StopAgentResponse stopped;
      status = agents_->StopAgent(Ctx(milliseconds(20000)).get(), stop, &stopped);
      if (!status.ok()) return {kFail, "StopAgent failed: " + Describe(status)};
    }
    v1::DetachMemoryRequest detach;
    detach.set_name(name);
    v1::DetachMemoryResponse detached;
    status = agents_->DetachMemory(Ctx().get(), detach, &detached);
    if (!status.ok()) return {kFail, "DetachMemory failed: " + Describe(status)};
    return {kPass, ""};
  }

  Outcome Interaction() {
    const c::Os here = c::CurrentOs();
    const c::SupportLevel level = d_.capabilities.Project(c::Capability::kInteraction, here);
    const std::string quoted = QuoteDeclared(d_, c::Capability::kInteraction, here);
    const std::string name = NewName("interaction");
    MustRegisterProbe(name, {"--echo"});
    MustStartRunning(name);
    static std::atomic<int> n{0};
    const std::string text =
        "tck-echo-" + std::to_string(getpid()) + "-" + std::to_string(n.fetch_add(1));
    v1::SendInputRequest send;
    send.set_name(name);
    send.set_text(text);
    v1::SendInputResponse sent;
    grpc::Status status = agents_->SendInput(Ctx().get(), send, &sent);
    if (level == c::SupportLevel::kUnsupported) {
      if (status.ok()) return {kFail, "SendInput succeeded although " + quoted};
      if (status.error_code() != grpc::FAILED_PRECONDITION ||
          ErrorReason(status) != "CAPABILITY_UNSUPPORTED") {
        return {kFail, "SendInput refused with " + Describe(status) +
                           ", expected FAILED_PRECONDITION/CAPABILITY_UNSUPPORTED"};
      }
      return {kPass, ""};
    }
    if (!status.ok())
      return {kFail, "SendInput failed although " + quoted + ": " + Describe(status)};
    const std::string want = "echo: " + text;
    bool echoed = deadline_->WaitFor(
        [&] {
          v1::ReadLogsRequest request;
          request.mutable_filter()->set_name(name);
          request.mutable_filter()->set_stream(v1::LOG_STREAM_AGENT_OUT);
          v1::ReadLogsResponse response;
          if (!logs_->ReadLogs(Ctx(milliseconds(5000)).get(), request, &response).ok()) {
            return false;
          }
          for (const v1::LogLine& line : response.lines()) {
            if (line.text() == want) return true;
          }
          return false;
        },
        milliseconds(10000));
    if (!echoed)
      return {kFail, "the line sent with SendInput never reached the agent ('" + want +
                         "' not in its captured stdout)"};
    return {kPass, ""};
  }

  const Options& options_;
  c::AdapterDeclaration d_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::AgentService::Stub> agents_;
  std::unique_ptr<v1::ConfigService::Stub> config_;
  std::unique_ptr<v1::LogService::Stub> logs_;
  std::unique_ptr<v1::EventService::Stub> events_;
  const Deadline* deadline_ = nullptr;
  std::vector<std::string> created_;
  std::string argv_file_;  // set while a section runs the probe behind the argv wrapper
};

}  // namespace

const std::vector<std::string>& AllSections() {
  static const std::vector<std::string> kSections = {"capability_edges",
                                                     "lifecycle",
                                                     "pause",
                                                     "config_mapping",
                                                     "metering_self_reported",
                                                     "metering_engine_observed",
                                                     "memory",
                                                     "interaction"};
  return kSections;
}

Report RunKit(const Options& options) {
  Report report;
  std::vector<std::string> selected;
  for (const std::string& s : AllSections()) {
    if (options.sections.empty() ||
        std::find(options.sections.begin(), options.sections.end(), s) != options.sections.end()) {
      selected.push_back(s);
    }
  }
  for (const std::string& s : options.sections) {
    if (std::find(AllSections().begin(), AllSections().end(), s) == AllSections().end()) {
      selected.push_back(s);  // reported as an unknown section (fail)
    }
  }
  absl::StatusOr<std::unique_ptr<c::Adapter>> adapter =
      options.builtin_kind.empty()
          ? c::LoadManifestAdapter(options.manifest_text, options.manifest_path)
          : c::LoadBuiltinAdapter(options.builtin_kind);
  if (!adapter.ok()) {
    report.adapter_kind = options.builtin_kind;
    for (const std::string& s : selected) {
      report.sections.push_back(
          {s, kFail,
           "the subject's declaration is invalid: " + std::string(adapter.status().message())});
    }
    return report;
  }
  report.adapter_kind = (*adapter)->Declaration().kind;
  Kit kit(options, (*adapter)->Declaration());
  for (const std::string& s : selected) {
    report.sections.push_back(kit.Run(s));
  }
  return report;
}

std::string ReportJson(const Report& report) {
  c::JsonWriter json;
  json.BeginObject();
  json.Key("schema_version").Int(1);
  json.Key("adapter_kind").String(report.adapter_kind);
  json.Key("contract_version").String(c::kContractVersion);
  json.Key("sections").BeginArray();
  for (const SectionResult& s : report.sections) {
    json.BeginObject().Key("section").String(s.section).Key("result").BeginObject();
    json.Key("status").String(s.status);
    if (s.status != kPass) json.Key("reason").String(s.reason);
    json.EndObject().EndObject();
  }
  json.EndArray();
  json.Key("honor_system").BeginArray();
  for (const char* duty : {"env_var_render", "self_update_pinning", "config_layer_disclosure"}) {
    json.BeginObject().Key("duty").String(duty).Key("status").String("unverified").EndObject();
  }
  json.EndArray();
  json.EndObject();
  return json.Take();
}

bool Conformant(const Report& report) {
  for (const SectionResult& s : report.sections) {
    if (s.status == kFail) return false;
  }
  return true;
}

}  // namespace ktesio::tck
