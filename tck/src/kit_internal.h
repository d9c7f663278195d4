#pragma once

// Internals of the Conformance Test Kit shared by the section files: the API client (`Kit`),
// the bounded section clock, and small status/text/proc helpers. Not installed; the public
// surface is ktesio/tck/kit.h.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ktesio/contract/declaration.h"
#include "ktesio/tck/kit.h"
#include "ktesio/v1/agent.grpc.pb.h"
#include "ktesio/v1/config.grpc.pb.h"
#include "ktesio/v1/events.grpc.pb.h"
#include "ktesio/v1/logs.grpc.pb.h"
#include "loopback_http.h"

namespace ktesio::tck::internal {

namespace c = ::ktesio::contract;
namespace v1 = ::ktesio::v1;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline constexpr char kPass[] = "pass";
inline constexpr char kFail[] = "fail";
inline constexpr char kNotApplicable[] = "not_applicable";

// --- helpers (helpers.cc) ----------------------------------------------------------------------

std::string Str(std::string_view s);
// The whole file, or "" when it cannot be read.
std::string ReadFile(const std::string& path);
// The ktesio.v1 ErrorDetail reason carried by `status`, or "".
std::string ErrorReason(const grpc::Status& status);
// "FAILED_PRECONDITION/CAPABILITY_UNSUPPORTED: message".
std::string Describe(const grpc::Status& status);
// `status` (not OK) as an absl::Status with the same code and the message
// "<doing> failed: <Describe(status)>".
absl::Status RpcFailed(const grpc::Status& status, std::string_view doing);
// "running" for AGENT_STATE_RUNNING.
std::string StateName(v1::AgentState state);
std::string LevelName(v1::SupportLevel level);
v1::SupportLevel ToProto(c::SupportLevel level);
// "pause.linux = \"unsupported\" (declared)" or "pause.linux: no entry (projects to unsupported)".
std::string QuoteDeclared(const c::AdapterDeclaration& d, c::Capability capability, c::Os os);
// /proc/<pid>/stat state letter, or 0 when the process is gone.
char ProcState(long long pid);
// True when `pid` no longer exists or is a zombie.
bool ProcessGone(long long pid);
// A TOML basic string literal for `s`, quotes included.
std::string TomlString(const std::string& s);
// The parts joined with "; ".
std::string Join(const std::vector<std::string>& parts);

// A bounded section: every wait stops at the section deadline.
class Deadline {
 public:
  explicit Deadline(std::chrono::seconds budget) : end_(Clock::now() + budget) {}
  bool Expired() const { return Clock::now() >= end_; }
  // A gRPC deadline: at most `cap`, never past the section deadline.
  std::chrono::system_clock::time_point Rpc(milliseconds cap = milliseconds(10000)) const;
  // Polls `condition` every 50 ms for at most `cap` (and never past the section deadline).
  bool WaitFor(const std::function<bool()>& condition, milliseconds cap) const;

 private:
  Clock::time_point end_;
};

// What a launched agent received: its environment, argv and Agent Home.
struct Delivery {
  std::string agent;    // subject mode: "pid 123 (sh)", the process the engine launched
  std::string environ;  // the agent process's, NUL-separated
  std::vector<std::string> argv;
  std::string home;
  // Subject mode: the agent's other live processes (descendants, session members, adopted
  // orphans). Environment is inherited, so each must carry every env-delivered value too: a
  // process without it had it removed on the way (e.g. a wrapper running `env -u VAR agent`).
  struct Process {
    std::string name;  // "pid 123 (sh)"
    std::string environ;
  };
  std::vector<Process> others;
};

// --- the kit (client.cc, sections/*.cc) ---------------------------------------------------------

// Runs sections against one daemon for one subject declaration. Not thread-safe; one section
// at a time.
//
// Errors: a section returns its verdict as an Outcome, or a non-OK status when a step it depends
// on failed (an RPC, the agent never reaching running, /proc unreadable); Run() reports such a
// status as `fail` with the status message as the reason. The helpers below that return
// absl::Status carry that reason as the message, with the failed RPC's code or the one named.
class Kit {
 public:
  Kit(const Options& options, c::AdapterDeclaration declaration);

  // Runs one section within the section budget. Instances the section registered are removed
  // (force, home deleted) before it returns.
  SectionResult Run(const std::string& section);

 private:
  // (status, reason): kPass with "", or kFail / kNotApplicable with why.
  using Outcome = std::pair<std::string, std::string>;

  absl::StatusOr<Outcome> Dispatch(const std::string& section);

  // --- API wrappers (client.cc) ---
  std::string NewName(const std::string& section);
  std::unique_ptr<grpc::ClientContext> Ctx(milliseconds cap = milliseconds(10000));
  // The synthesized manifest: the subject's declaration with the probe as the program.
  std::string ProbeManifest(const std::vector<std::string>& args, bool keep_config = true,
                            std::optional<c::MeteringSource> metering = std::nullopt);
  void UseArgvWrapperIfFlags(const std::string& name);
  grpc::Status RegisterManifest(const std::string& name, const std::string& manifest,
                                v1::AgentInstance* out = nullptr);
  // Registers the probe under the synthesized manifest; the RegisterAgent error otherwise.
  absl::Status RegisterProbe(
      const std::string& name, const std::vector<std::string>& args,
      std::optional<c::MeteringSource> metering = c::MeteringSource::kSelfReported);
  // Registers the subject itself (its manifest or builtin kind) as `name`; the RegisterAgent
  // error otherwise.
  absl::Status RegisterSubject(const std::string& name, v1::RegisterAgentResponse* response);
  // Subject mode: registers the subject itself; when it is engine-observed, also points its
  // metering.upstream_base_url at a kit-run loopback provider so it can start (UNAVAILABLE when
  // that provider cannot listen).
  absl::Status RegisterSubjectToRun(const std::string& name);
  // The subject itself in subject mode, else the probe with `probe_args`.
  absl::Status RegisterAgent(const std::string& name, const std::vector<std::string>& probe_args);
  bool subject_mode() const { return options_.subject_program; }
  // Captured agent-out and agent-err lines of `name` (engine lines excluded); -1 on error.
  long long OutputLines(const std::string& name, std::string* last = nullptr);
  // `name`'s instance, or nullopt when GetAgent fails (for polling).
  std::optional<v1::AgentInstance> Get(const std::string& name);
  // `name`'s instance; the GetAgent error otherwise.
  absl::StatusOr<v1::AgentInstance> GetInstance(const std::string& name);
  grpc::Status Start(const std::string& name, v1::StartAgentResponse* response);
  // Starts `name` and waits (15 s at most) for it to be running with a pid: the StartAgent
  // error, or DEADLINE_EXCEEDED naming the state and cause it reached instead.
  absl::StatusOr<v1::AgentInstance> StartRunning(const std::string& name);
  // Stops `name` with a 5 s graceful window: the StopAgent error ("StopAgent failed: ..."), or OK.
  absl::Status Stop(const std::string& name);
  // The SetConfig error, or OK.
  absl::Status SetConfig(const std::string& name, const std::string& key, const std::string& value);
  void Cleanup();
  // Replays `name`'s events from cursor 0 and then follows live ones, calling `seen` for each
  // until it returns true or `cap` runs out. True when `seen` ended the watch.
  bool WatchEvents(const std::string& name, milliseconds cap,
                   const std::function<bool(const v1::Event&)>& seen);
  // Transition events of `name` (prior_state, new_state), replayed from cursor 0 until `until`.
  std::vector<std::pair<std::string, std::string>> Transitions(const std::string& name,
                                                               const std::string& until);

  // --- delivery observation (sections/config_mapping.cc) ---
  static std::optional<std::string> ValueFor(const std::string& key, int n);
  // What the running `instance` received; PERMISSION_DENIED when its /proc entries cannot be
  // read (the kit must run as the daemon's user on its host).
  absl::StatusOr<Delivery> ReadDelivery(const v1::AgentInstance& instance);
  static std::string CheckDelivered(const Delivery& got, const std::string& key,
                                    const c::ConfigTarget& target, const std::string& value);

  // --- sections (sections/*.cc) ---
  absl::StatusOr<Outcome> CapabilityEdges();
  absl::StatusOr<Outcome> Lifecycle();
  absl::StatusOr<Outcome> LifecycleCrashLeg();
  absl::StatusOr<Outcome> LifecycleEscalationLeg();
  absl::StatusOr<Outcome> Pause();
  Outcome PauseGuaranteed(const std::string& name, long long pid, bool chatty,
                          const std::string& quoted);
  absl::StatusOr<Outcome> PauseBestEffort(const std::string& name);
  Outcome ProbeFreeze(long long pid, const std::string& quoted);
  Outcome SubjectFreeze(const std::string& name, long long pid, const std::string& quoted);
  absl::StatusOr<Outcome> ConfigMapping();
  absl::StatusOr<Outcome> MeteringSelfReported();
  absl::StatusOr<Outcome> SubjectReportsUsage(const std::string& name);
  std::string WhyNoUsage(const std::string& name);
  absl::StatusOr<Outcome> MeteringEngineObserved();
  Outcome ProxiedCallsMetered(const std::string& name, const std::string& proxy_url,
                              const LoopbackProvider& provider);
  absl::StatusOr<Outcome> Memory();
  absl::StatusOr<Outcome> MemoryDirDelivered(const std::string& name, const std::string& dir,
                                             const c::ConfigTarget& target);
  absl::StatusOr<Outcome> Interaction();
  bool HasOutputLine(const std::string& name, const std::string& want);

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
  std::unique_ptr<LoopbackProvider> provider_;  // subject mode, engine-observed subjects
};

}  // namespace ktesio::tck::internal
