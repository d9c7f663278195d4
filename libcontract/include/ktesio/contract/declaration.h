#pragma once

// The data every adapter declares, whatever its kind ("two kinds, one trait"): a native builtin
// builds an AdapterDeclaration in code, a manifest adapter gets one from ParseManifest().

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace ktesio::contract {

// The Adapter Contract version this library implements.
inline constexpr std::string_view kContractVersion = "1.0.0";
inline constexpr std::uint64_t kContractMajor = 1;

enum class Os { kLinux, kMacos, kWindows };
inline constexpr Os kAllOses[] = {Os::kLinux, Os::kMacos, Os::kWindows};

// The OS this binary was built for.
Os CurrentOs();
// "linux" | "macos" | "windows".
std::string_view OsName(Os os);
absl::StatusOr<Os> ParseOs(std::string_view name);

enum class SupportLevel { kUnsupported, kBestEffort, kGuaranteed };
// "unsupported" | "best-effort" | "guaranteed".
std::string_view SupportLevelName(SupportLevel level);
absl::StatusOr<SupportLevel> ParseSupportLevel(std::string_view name);

// Modeled capabilities in contract v1.
enum class Capability { kPause, kInteraction };
inline constexpr Capability kAllCapabilities[] = {Capability::kPause, Capability::kInteraction};
std::string_view CapabilityName(Capability capability);  // "pause" | "interaction"

// A per-OS Capability Declaration. An OS with no entry projects to kUnsupported.
class CapabilityDeclaration {
 public:
  void Set(Capability capability, Os os, SupportLevel level);
  // The declared level, or kUnsupported when there is no entry.
  SupportLevel Project(Capability capability, Os os) const;
  // Whether an explicit entry exists (used to quote "no entry for <os>" honestly).
  bool HasEntry(Capability capability, Os os) const;
  // True when at least one entry anywhere is not kUnsupported (the viability bar).
  bool IsViable() const;
  bool operator==(const CapabilityDeclaration&) const = default;

 private:
  std::map<std::pair<Capability, Os>, SupportLevel> entries_;
};

enum class MeteringSource { kSelfReported, kEngineObserved };
std::string_view MeteringSourceName(MeteringSource source);  // "self-reported" | "engine-observed"
absl::StatusOr<MeteringSource> ParseMeteringSource(std::string_view name);

enum class InteractionChannel { kStdio, kHttp };
std::string_view InteractionChannelName(InteractionChannel channel);  // "stdio" | "http"
absl::StatusOr<InteractionChannel> ParseInteractionChannel(std::string_view name);

// One lifecycle op template: the program, its arguments and environment overrides.
struct OpTemplate {
  std::string exec;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  bool operator==(const OpTemplate&) const = default;
};

// Where one unified config key is delivered: exactly one of env, flag or file.
struct ConfigTarget {
  enum class Kind { kEnv, kFlag, kFile };
  Kind kind = Kind::kEnv;
  std::string env;        // kEnv: the variable name
  std::string flag;       // kFlag: the flag, rendered as two argv tokens
  std::string file_path;  // kFile: relative to the Agent Home, confined to it
  std::string file_key;   // kFile: dotted native key inside the TOML document
  bool operator==(const ConfigTarget&) const = default;
};

struct AdapterDeclaration {
  std::string kind;
  std::string display_name;      // optional [adapter].name, "" when absent
  std::string contract_version;  // manifest adapters only; "" for builtins
  OpTemplate start;
  std::optional<OpTemplate> stop;
  std::optional<OpTemplate> pause;
  std::optional<OpTemplate> resume;
  CapabilityDeclaration capabilities;
  MeteringSource metering = MeteringSource::kSelfReported;
  InteractionChannel channel = InteractionChannel::kStdio;
  std::map<std::string, ConfigTarget> config;  // unified key -> target
  bool operator==(const AdapterDeclaration&) const = default;
};

}  // namespace ktesio::contract
