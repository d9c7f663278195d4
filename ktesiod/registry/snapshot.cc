#include "registry/snapshot.h"

#include "ktesio/contract/json_writer.h"

namespace ktesio::daemon::registry {
namespace {

using contract::Capability;
using contract::Os;

void FillTemplate(const contract::OpTemplate& from, v1::OpTemplate* to) {
  to->set_exec(from.exec);
  for (const std::string& arg : from.args) {
    to->add_args(arg);
  }
  for (const auto& [key, value] : from.env) {
    (*to->mutable_env())[key] = value;
  }
}

contract::OpTemplate ReadTemplate(const v1::OpTemplate& from) {
  contract::OpTemplate to;
  to.exec = from.exec();
  to.args.assign(from.args().begin(), from.args().end());
  for (const auto& [key, value] : from.env()) {
    to.env[key] = value;
  }
  return to;
}

// An OS without an entry stays SUPPORT_LEVEL_UNSPECIFIED so messages can say "no entry";
// every reader projects it to unsupported.
void FillLevels(const contract::CapabilityDeclaration& declaration, Capability capability,
                v1::CapabilityLevels* levels) {
  auto level = [&](Os os) {
    return declaration.HasEntry(capability, os) ? ToProto(declaration.Project(capability, os))
                                                : v1::SUPPORT_LEVEL_UNSPECIFIED;
  };
  levels->set_on_linux(level(Os::kLinux));
  levels->set_on_macos(level(Os::kMacos));
  levels->set_on_windows(level(Os::kWindows));
}

v1::SupportLevel LevelFor(const v1::CapabilityLevels& levels, Os os) {
  switch (os) {
    case Os::kLinux:
      return levels.on_linux();
    case Os::kMacos:
      return levels.on_macos();
    case Os::kWindows:
      return levels.on_windows();
  }
  return v1::SUPPORT_LEVEL_UNSUPPORTED;
}

const v1::CapabilityLevels& LevelsOf(const v1::CapabilityDeclaration& declaration,
                                     Capability capability) {
  return capability == Capability::kPause ? declaration.pause() : declaration.interaction();
}

void WriteTemplate(contract::JsonWriter& json, const v1::OpTemplate& op) {
  json.BeginObject().Key("exec").String(op.exec()).Key("args").BeginArray();
  for (const std::string& arg : op.args()) {
    json.String(arg);
  }
  json.EndArray().Key("env").BeginObject();
  std::map<std::string, std::string> env(op.env().begin(), op.env().end());
  for (const auto& [key, value] : env) {
    json.Key(key).String(value);
  }
  json.EndObject().EndObject();
}

}  // namespace

v1::SupportLevel ToProto(contract::SupportLevel level) {
  switch (level) {
    case contract::SupportLevel::kGuaranteed:
      return v1::SUPPORT_LEVEL_GUARANTEED;
    case contract::SupportLevel::kBestEffort:
      return v1::SUPPORT_LEVEL_BEST_EFFORT;
    case contract::SupportLevel::kUnsupported:
      return v1::SUPPORT_LEVEL_UNSUPPORTED;
  }
  return v1::SUPPORT_LEVEL_UNSUPPORTED;
}

contract::SupportLevel FromProto(v1::SupportLevel level) {
  switch (level) {
    case v1::SUPPORT_LEVEL_GUARANTEED:
      return contract::SupportLevel::kGuaranteed;
    case v1::SUPPORT_LEVEL_BEST_EFFORT:
      return contract::SupportLevel::kBestEffort;
    default:
      return contract::SupportLevel::kUnsupported;
  }
}

std::string SupportLevelWire(v1::SupportLevel level) {
  return std::string(contract::SupportLevelName(FromProto(level)));
}

v1::AdapterSnapshot ToSnapshot(const contract::AdapterDeclaration& declaration, bool builtin,
                               const std::string& manifest_path) {
  v1::AdapterSnapshot snapshot;
  snapshot.set_kind(declaration.kind);
  snapshot.set_display_name(declaration.display_name);
  snapshot.set_contract_version(declaration.contract_version);
  snapshot.set_builtin(builtin);
  snapshot.set_manifest_path(manifest_path);
  FillTemplate(declaration.start, snapshot.mutable_start());
  if (declaration.stop) {
    FillTemplate(*declaration.stop, snapshot.mutable_stop());
  }
  if (declaration.pause) {
    FillTemplate(*declaration.pause, snapshot.mutable_pause());
  }
  if (declaration.resume) {
    FillTemplate(*declaration.resume, snapshot.mutable_resume());
  }
  FillLevels(declaration.capabilities, Capability::kPause,
             snapshot.mutable_capabilities()->mutable_pause());
  FillLevels(declaration.capabilities, Capability::kInteraction,
             snapshot.mutable_capabilities()->mutable_interaction());
  snapshot.set_metering_source(declaration.metering == contract::MeteringSource::kEngineObserved
                                   ? v1::METERING_SOURCE_ENGINE_OBSERVED
                                   : v1::METERING_SOURCE_SELF_REPORTED);
  snapshot.set_channel(declaration.channel == contract::InteractionChannel::kHttp
                           ? v1::INTERACTION_CHANNEL_HTTP
                           : v1::INTERACTION_CHANNEL_STDIO);
  for (const auto& [key, target] : declaration.config) {
    v1::ConfigTarget& out = (*snapshot.mutable_config())[key];
    switch (target.kind) {
      case contract::ConfigTarget::Kind::kEnv:
        out.set_env(target.env);
        break;
      case contract::ConfigTarget::Kind::kFlag:
        out.set_flag(target.flag);
        break;
      case contract::ConfigTarget::Kind::kFile:
        out.mutable_file()->set_path(target.file_path);
        out.mutable_file()->set_key(target.file_key);
        break;
    }
  }
  return snapshot;
}

contract::AdapterDeclaration FromSnapshot(const v1::AdapterSnapshot& snapshot) {
  contract::AdapterDeclaration declaration;
  declaration.kind = snapshot.kind();
  declaration.display_name = snapshot.display_name();
  declaration.contract_version = snapshot.contract_version();
  declaration.start = ReadTemplate(snapshot.start());
  if (!snapshot.stop().exec().empty()) {
    declaration.stop = ReadTemplate(snapshot.stop());
  }
  if (!snapshot.pause().exec().empty()) {
    declaration.pause = ReadTemplate(snapshot.pause());
  }
  if (!snapshot.resume().exec().empty()) {
    declaration.resume = ReadTemplate(snapshot.resume());
  }
  for (Capability capability : contract::kAllCapabilities) {
    for (Os os : contract::kAllOses) {
      v1::SupportLevel level = LevelFor(LevelsOf(snapshot.capabilities(), capability), os);
      if (level != v1::SUPPORT_LEVEL_UNSPECIFIED) {
        declaration.capabilities.Set(capability, os, FromProto(level));
      }
    }
  }
  declaration.metering = snapshot.metering_source() == v1::METERING_SOURCE_ENGINE_OBSERVED
                             ? contract::MeteringSource::kEngineObserved
                             : contract::MeteringSource::kSelfReported;
  declaration.channel = snapshot.channel() == v1::INTERACTION_CHANNEL_HTTP
                            ? contract::InteractionChannel::kHttp
                            : contract::InteractionChannel::kStdio;
  for (const auto& [key, target] : snapshot.config()) {
    contract::ConfigTarget out;
    if (target.has_file()) {
      out.kind = contract::ConfigTarget::Kind::kFile;
      out.file_path = target.file().path();
      out.file_key = target.file().key();
    } else if (target.target_case() == v1::ConfigTarget::kFlag) {
      out.kind = contract::ConfigTarget::Kind::kFlag;
      out.flag = target.flag();
    } else {
      out.kind = contract::ConfigTarget::Kind::kEnv;
      out.env = target.env();
    }
    declaration.config[key] = out;
  }
  return declaration;
}

v1::ProjectedCapabilities Project(const v1::AdapterSnapshot& snapshot) {
  const Os os = contract::CurrentOs();
  v1::ProjectedCapabilities projected;
  projected.set_os(std::string(contract::OsName(os)));
  // A capability with no entry for this OS projects to unsupported (Adapter Contract): the
  // snapshot keeps "no entry" (UNSPECIFIED) apart, the projection does not.
  const auto on_this_os = [os](const v1::CapabilityLevels& levels) {
    const v1::SupportLevel level = LevelFor(levels, os);
    return level == v1::SUPPORT_LEVEL_UNSPECIFIED ? v1::SUPPORT_LEVEL_UNSUPPORTED : level;
  };
  projected.set_pause(on_this_os(snapshot.capabilities().pause()));
  projected.set_interaction(on_this_os(snapshot.capabilities().interaction()));
  return projected;
}

std::string RenderAdapterJson(const v1::AdapterSnapshot& snapshot) {
  contract::JsonWriter json;
  json.BeginObject().Key("schema_version").Int(1);
  json.Key("kind").String(snapshot.kind());
  json.Key("display_name").String(snapshot.display_name());
  json.Key("contract_version").String(snapshot.contract_version());
  json.Key("builtin").Bool(snapshot.builtin());
  json.Key("capabilities").BeginObject();
  for (Capability capability : contract::kAllCapabilities) {
    json.Key(contract::CapabilityName(capability)).BeginObject();
    for (Os os : contract::kAllOses) {
      json.Key(contract::OsName(os))
          .String(SupportLevelWire(LevelFor(LevelsOf(snapshot.capabilities(), capability), os)));
    }
    json.EndObject();
  }
  json.EndObject();
  json.Key("metering_source")
      .String(snapshot.metering_source() == v1::METERING_SOURCE_ENGINE_OBSERVED ? "engine-observed"
                                                                                : "self-reported");
  json.Key("interaction_channel")
      .String(snapshot.channel() == v1::INTERACTION_CHANNEL_HTTP ? "http" : "stdio");
  json.Key("config").BeginObject();
  std::map<std::string, v1::ConfigTarget> config(snapshot.config().begin(),
                                                 snapshot.config().end());
  for (const auto& [key, target] : config) {
    json.Key(key).BeginObject();
    if (target.has_file()) {
      json.Key("file").BeginObject().Key("path").String(target.file().path());
      json.Key("key").String(target.file().key()).EndObject();
    } else if (target.target_case() == v1::ConfigTarget::kFlag) {
      json.Key("flag").String(target.flag());
    } else {
      json.Key("env").String(target.env());
    }
    json.EndObject();
  }
  json.EndObject();
  json.Key("start");
  WriteTemplate(json, snapshot.start());
  if (!snapshot.stop().exec().empty()) {
    json.Key("stop");
    WriteTemplate(json, snapshot.stop());
  }
  if (!snapshot.pause().exec().empty()) {
    json.Key("pause");
    WriteTemplate(json, snapshot.pause());
  }
  if (!snapshot.resume().exec().empty()) {
    json.Key("resume");
    WriteTemplate(json, snapshot.resume());
  }
  json.EndObject();
  return json.Take() + "\n";
}

}  // namespace ktesio::daemon::registry
