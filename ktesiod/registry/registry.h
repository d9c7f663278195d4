#pragma once

// The registry: registering, listing, showing and removing Agent Instances. Validation happens
// entirely before any write; a failure at any step leaves no row and no directory behind.
//
// Thread-safety: not thread-safe; used from the engine's owner thread.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ktesio/v1/agent.pb.h"
#include "store/store.h"

namespace ktesio::daemon::registry {

// The Agent Home of `name` under `state_dir`.
std::string AgentHomePath(const std::string& state_dir, const std::string& name);

class Registry {
 public:
  using Clock = std::function<int64_t()>;  // unix milliseconds

  Registry(store::Store& store, std::string state_dir, Clock clock)
      : store_(store), state_dir_(std::move(state_dir)), clock_(std::move(clock)) {}

  // Registers `request.name`. Errors: INVALID_ARGUMENT/INVALID_NAME, INVALID_ARGUMENT/
  // UNKNOWN_KIND, INVALID_ARGUMENT/MANIFEST_INVALID, FAILED_PRECONDITION/CONTRACT_INCOMPATIBLE,
  // NOT_FOUND/MANIFEST_NOT_FOUND, ALREADY_EXISTS/DUPLICATE_NAME, INTERNAL/IO_ERROR|STORE_ERROR.
  absl::StatusOr<store::InstanceRow> Register(const v1::RegisterAgentRequest& request);

  // Errors: NOT_FOUND/NOT_FOUND, INVALID_ARGUMENT/INVALID_NAME, INTERNAL/STORE_ERROR.
  absl::StatusOr<store::InstanceRow> Find(const std::string& name);

  // Deletes the row (and the home when delete_home). The caller has checked the state.
  // Errors: INTERNAL/IO_ERROR|STORE_ERROR.
  absl::Status Remove(const store::InstanceRow& row, bool delete_home);

 private:
  store::Store& store_;
  std::string state_dir_;
  Clock clock_;
};

// The adapter snapshot a registration of `request` would store, without writing anything
// (validation for fleet files). Errors: as Registry::Register's adapter errors.
absl::StatusOr<v1::AdapterSnapshot> PreviewSnapshot(const v1::RegisterAgentRequest& request);

// Reads a manifest named by a path that is a directory holding adapter.toml or the file itself
// (a client's RegisterAgent without content): a regular file of at most kMaxManifestBytes, read
// without blocking on a FIFO or a device. Errors: NOT_FOUND/MANIFEST_NOT_FOUND,
// INVALID_ARGUMENT/MANIFEST_INVALID (not a regular file, too large), INTERNAL/IO_ERROR.
absl::StatusOr<std::string> ReadManifestAt(const std::string& path, std::string* resolved_file);

}  // namespace ktesio::daemon::registry
