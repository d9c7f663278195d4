// Section capability_edges: the subject registers and its persisted projection equals its
// declaration.

#include "kit_internal.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::tck::internal {
namespace {

// Appends where the persisted per-OS levels differ from the declaration `d`.
void LevelProblems(const c::AdapterDeclaration& d, const v1::AgentInstance& instance,
                   std::vector<std::string>& problems) {
  for (c::Capability capability : c::kAllCapabilities) {
    const v1::CapabilityLevels& levels = capability == c::Capability::kPause
                                             ? instance.capabilities().pause()
                                             : instance.capabilities().interaction();
    for (c::Os os : c::kAllOses) {
      v1::SupportLevel got = os == c::Os::kLinux   ? levels.on_linux()
                             : os == c::Os::kMacos ? levels.on_macos()
                                                   : levels.on_windows();
      const std::string key = Str(c::CapabilityName(capability)) + "." + Str(c::OsName(os));
      if (d.capabilities.HasEntry(capability, os)) {
        v1::SupportLevel want = ToProto(d.capabilities.Project(capability, os));
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
}

// Appends where the projection on this OS and the metering source differ from `d`.
void ProjectionProblems(const c::AdapterDeclaration& d, const v1::AgentInstance& instance,
                        std::vector<std::string>& problems) {
  const c::Os here = c::CurrentOs();
  if (instance.projected().os() != Str(c::OsName(here))) {
    problems.push_back("projected.os is '" + instance.projected().os() + "', expected '" +
                       Str(c::OsName(here)) + "'");
  }
  v1::SupportLevel want_pause = ToProto(d.capabilities.Project(c::Capability::kPause, here));
  v1::SupportLevel want_inter = ToProto(d.capabilities.Project(c::Capability::kInteraction, here));
  if (instance.projected().pause() != want_pause) {
    problems.push_back("projected pause is " + LevelName(instance.projected().pause()) +
                       ", declaration projects " + LevelName(want_pause));
  }
  if (instance.projected().interaction() != want_inter) {
    problems.push_back("projected interaction is " + LevelName(instance.projected().interaction()) +
                       ", declaration projects " + LevelName(want_inter));
  }
  v1::MeteringSource want_source = d.metering == c::MeteringSource::kSelfReported
                                       ? v1::METERING_SOURCE_SELF_REPORTED
                                       : v1::METERING_SOURCE_ENGINE_OBSERVED;
  if (instance.metering_source() != want_source) {
    problems.push_back("metering source persisted differently from the declaration");
  }
}

// Appends where the persisted config mapping differs from the declared one.
void ConfigProblems(const c::AdapterDeclaration& d, const v1::AgentInstance& instance,
                    std::vector<std::string>& problems) {
  const auto& persisted = instance.adapter().config();
  if (static_cast<size_t>(persisted.size()) != d.config.size()) {
    problems.push_back("persisted config mapping has " + std::to_string(persisted.size()) +
                       " keys, declared " + std::to_string(d.config.size()));
  }
  for (const auto& [key, target] : d.config) {
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
    if (!same) {
      problems.push_back("config key '" + key + "' persisted with another target");
    }
  }
}

}  // namespace

absl::StatusOr<Kit::Outcome> Kit::CapabilityEdges() {
  const std::string name = NewName("capability_edges");
  v1::RegisterAgentResponse registered;
  KT_RETURN_IF_ERROR(RegisterSubject(name, &registered));
  KT_ASSIGN_OR_RETURN(const v1::AgentInstance instance, GetInstance(name));
  std::vector<std::string> problems;
  if (instance.kind() != d_.kind) {
    problems.push_back("kind persisted as '" + instance.kind() + "', declared '" + d_.kind + "'");
  }
  LevelProblems(d_, instance, problems);
  ProjectionProblems(d_, instance, problems);
  ConfigProblems(d_, instance, problems);
  if (!problems.empty()) {
    return Outcome{kFail, Join(problems)};
  }
  return Outcome{kPass, ""};
}

}  // namespace ktesio::tck::internal
