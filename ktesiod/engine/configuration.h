#pragma once

// Per-instance configuration as operators edit it (set, get, unset a key of the instance file),
// the daemon's secrets, and an instance's memory backing. What a start delivers is
// ConfigBridge's; this owner is the editing side. Lives on the engine thread.

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/layers.h"
#include "engine/config_bridge.h"
#include "registry/registry.h"
#include "store/store.h"

namespace ktesio::daemon::engine {

class Configuration {
 public:
  // `proxy_url`: an instance's live metering proxy URL ("" when none), shown by Get as the agent
  // received it.
  // `changed` hears of every edit that changes what a start would deliver: the instance's name,
  // or "" for a secret (any instance may refer to it).
  Configuration(store::Store& store, ConfigBridge& config, registry::Registry& registry,
                std::function<std::string(const std::string& name)> proxy_url,
                std::function<void(const std::string& name)> changed = nullptr)
      : store_(store),
        config_(config),
        registry_(registry),
        proxy_url_(std::move(proxy_url)),
        changed_(std::move(changed)) {}

  // Validates and writes one key of the instance file. `entry` is what was stored, masked;
  // `notices` warn of what the value will not do (a secret in argv, an unused upstream URL,
  // inert dollar caps, a live instance that reads it at its next start).
  // Errors: NOT_FOUND, INVALID_ARGUMENT/UNKNOWN_CONFIG_KEY|CONFIG_INVALID, INTERNAL/IO_ERROR.
  struct Written {
    config::Entry entry;
    std::vector<std::string> notices;
  };
  absl::StatusOr<Written> Set(const std::string& name, const std::string& key,
                              const std::string& value);

  // The effective entries of an instance (only `key`'s when not empty), masked unless `reveal`;
  // revealed secret references show the secret's value, or the reference marked "(unresolved)".
  // Errors: NOT_FOUND (also for a `key` that is neither set nor defaulted), UNKNOWN_CONFIG_KEY,
  // CONFIG_INVALID.
  absl::StatusOr<std::vector<config::Entry>> Get(const std::string& name, const std::string& key,
                                                 bool reveal);

  // Removes one key from the instance file; false when it was not set.
  absl::StatusOr<bool> Unset(const std::string& name, const std::string& key);

  config::SecretsStore& secrets() { return config_.secrets(); }
  // The secrets store's Set and Remove, telling `changed`.
  absl::StatusOr<bool> SetSecret(const std::string& name, const std::string& value);
  absl::Status RemoveSecret(const std::string& name);

  // Memory backings change only while the instance is registered, stopped or failed.
  enum class MemoryKind { kFilesystem, kNative };
  struct MemoryChange {
    store::InstanceRow row;  // after the change
    std::vector<std::string> notices;
  };
  // Errors: NOT_FOUND, FAILED_PRECONDITION/INVALID_STATE (live, or another kind attached).
  absl::StatusOr<MemoryChange> AttachMemory(const std::string& name, MemoryKind kind);
  // Metadata only: the memory/ directory and its bytes stay. Errors: as AttachMemory.
  absl::StatusOr<store::InstanceRow> DetachMemory(const std::string& name);

 private:
  store::Store& store_;
  ConfigBridge& config_;
  registry::Registry& registry_;
  std::function<std::string(const std::string&)> proxy_url_;
  std::function<void(const std::string&)> changed_;
};

}  // namespace ktesio::daemon::engine
