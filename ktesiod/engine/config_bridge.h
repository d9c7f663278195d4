#pragma once

// Connects the layered config (config/) to the rest of the engine: the effective config of an
// instance, the supervisor settings derived from it, and start-time delivery into the agent's
// native mechanisms.

#include <sys/stat.h>

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "budget/budget.h"
#include "config/delivery.h"
#include "config/layers.h"
#include "config/secrets.h"
#include "ktesio/v1/common.pb.h"
#include "store/store.h"
#include "supervisor/supervisor.h"

namespace ktesio::daemon::engine {

class ConfigBridge {
 public:
  explicit ConfigBridge(std::string state_dir) : secrets_(std::move(state_dir)) {}

  // The effective entries of an instance (engine defaults < kind defaults < instance file <
  // engine-injected reserved keys). Errors: CONFIG_INVALID for an unreadable instance file.
  // `metering_base_url` is the instance's live metering proxy URL, when it has one.
  absl::StatusOr<std::vector<config::Entry>> Effective(
      const store::InstanceRow& row, const std::string& metering_base_url = "") const;

  // Supervisor settings from the effective config (defaults when the file is unreadable).
  supervisor::InstanceSettings Settings(const store::InstanceRow& row) const;

  // Budget limits and the Rate in force (a Rate needs both directions; dollar caps without one
  // are inert). Defaults (no limits) when the file is unreadable.
  budget::Limits Limits(const store::InstanceRow& row) const;

  // Renders and writes everything a start delivers (with `metering_base_url` injected at the
  // reserved key for an engine-observed instance); refuses with DELIVERY_FAILED (secret not
  // resolvable, {env:VAR} unset) or CONFIG_INVALID before anything is launched.
  absl::StatusOr<supervisor::Delivery> Deliver(const store::InstanceRow& row,
                                               const v1::AdapterSnapshot& snapshot,
                                               const std::string& metering_base_url) const;

  // Whether Deliver would succeed now: the same rendering (secrets resolved, {env:VAR} checked,
  // file targets merged), nothing written. A restart asks before it stops a running agent.
  absl::Status Deliverable(const store::InstanceRow& row, const v1::AdapterSnapshot& snapshot,
                           const std::string& metering_base_url) const {
    return Plan(row, snapshot, metering_base_url).status();
  }

  config::SecretsStore& secrets() { return secrets_; }

 private:
  absl::StatusOr<config::DeliveryPlan> Plan(const store::InstanceRow& row,
                                            const v1::AdapterSnapshot& snapshot,
                                            const std::string& metering_base_url) const;
  // The instance file of `home`, parsed once and reused while the file is unchanged (same
  // device, inode, size and modification time; the daemon replaces it atomically, so a write is
  // a new inode). Views of 1,000 instances read their settings and limits without re-reading
  // 2,000 files. Errors are not cached.
  absl::StatusOr<std::map<std::string, std::string>> LoadInstanceFile(
      const std::string& home) const;
  struct CachedFile {
    dev_t device = 0;
    ino_t inode = 0;
    off_t size = 0;
    timespec modified{};
    std::map<std::string, std::string> values;
  };
  mutable std::unordered_map<std::string, CachedFile> instance_files_;

  config::SecretsStore secrets_;
};

// The managed memory directory of an Agent Home.
std::string MemoryDir(const std::string& home);

}  // namespace ktesio::daemon::engine
