#include "ktesio/contract/declaration.h"

#include <string>

#include "ktesio/contract/error.h"
#include "ktesio/contract/text.h"

namespace ktesio::contract {

using text::Cat;
namespace {

// The shared failure of every Parse* below: the value as written plus the closed set it must
// belong to, so an operator can fix a typo without opening the docs.
absl::Status NotInEnum(std::string_view what, std::string_view value, std::string_view allowed) {
  return MakeError(
      absl::StatusCode::kInvalidArgument, reason::kManifestInvalid,
      Cat("invalid ", what, " '", text::Escape(value), "': expected one of ", allowed));
}

}  // namespace

Os CurrentOs() {
#if defined(_WIN32)
  return Os::kWindows;
#elif defined(__APPLE__)
  return Os::kMacos;
#else
  return Os::kLinux;
#endif
}

std::string_view OsName(Os os) {
  switch (os) {
    case Os::kLinux:
      return "linux";
    case Os::kMacos:
      return "macos";
    case Os::kWindows:
      return "windows";
  }
  return "unknown";
}

absl::StatusOr<Os> ParseOs(std::string_view name) {
  for (Os os : kAllOses) {
    if (name == OsName(os)) {
      return os;
    }
  }
  return NotInEnum("OS", name, "linux, macos, windows");
}

std::string_view SupportLevelName(SupportLevel level) {
  switch (level) {
    case SupportLevel::kUnsupported:
      return "unsupported";
    case SupportLevel::kBestEffort:
      return "best-effort";
    case SupportLevel::kGuaranteed:
      return "guaranteed";
  }
  return "unknown";
}

absl::StatusOr<SupportLevel> ParseSupportLevel(std::string_view name) {
  for (SupportLevel level :
       {SupportLevel::kGuaranteed, SupportLevel::kBestEffort, SupportLevel::kUnsupported}) {
    if (name == SupportLevelName(level)) {
      return level;
    }
  }
  return NotInEnum("support level", name, "guaranteed, best-effort, unsupported");
}

std::string_view CapabilityName(Capability capability) {
  switch (capability) {
    case Capability::kPause:
      return "pause";
    case Capability::kInteraction:
      return "interaction";
  }
  return "unknown";
}

void CapabilityDeclaration::Set(Capability capability, Os os, SupportLevel level) {
  entries_[{capability, os}] = level;
}

SupportLevel CapabilityDeclaration::Project(Capability capability, Os os) const {
  auto it = entries_.find({capability, os});
  return it == entries_.end() ? SupportLevel::kUnsupported : it->second;
}

bool CapabilityDeclaration::HasEntry(Capability capability, Os os) const {
  return entries_.count({capability, os}) > 0;
}

bool CapabilityDeclaration::IsViable() const {
  for (const auto& [unused_key, level] : entries_) {
    if (level != SupportLevel::kUnsupported) {
      return true;
    }
  }
  return false;
}

std::string_view MeteringSourceName(MeteringSource source) {
  switch (source) {
    case MeteringSource::kSelfReported:
      return "self-reported";
    case MeteringSource::kEngineObserved:
      return "engine-observed";
  }
  return "unknown";
}

absl::StatusOr<MeteringSource> ParseMeteringSource(std::string_view name) {
  for (MeteringSource source : {MeteringSource::kSelfReported, MeteringSource::kEngineObserved}) {
    if (name == MeteringSourceName(source)) {
      return source;
    }
  }
  return NotInEnum("metering source", name, "self-reported, engine-observed");
}

std::string_view InteractionChannelName(InteractionChannel channel) {
  switch (channel) {
    case InteractionChannel::kStdio:
      return "stdio";
    case InteractionChannel::kHttp:
      return "http";
  }
  return "unknown";
}

absl::StatusOr<InteractionChannel> ParseInteractionChannel(std::string_view name) {
  for (InteractionChannel channel : {InteractionChannel::kStdio, InteractionChannel::kHttp}) {
    if (name == InteractionChannelName(channel)) {
      return channel;
    }
  }
  return NotInEnum("interaction channel", name, "stdio, http");
}

}  // namespace ktesio::contract
