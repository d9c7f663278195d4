#pragma once

// The server-streaming BackupStore call: a worker thread writes a consistent copy of state.db
// (store::WriteConsistentCopy, a read-only connection of its own: the engine keeps writing) to
// a temporary file in the state dir, streams it in 1 MiB pieces, one write in flight at a time,
// and removes it.

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "api/call.h"
#include "ktesio/v1/system.grpc.pb.h"

namespace ktesio::daemon::api {

class BackupStoreReactor final : public grpc::ServerWriteReactor<v1::BackupStoreResponse> {
 public:
  BackupStoreReactor(ApiContext& api, grpc::CallbackServerContext* ctx);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void Work(std::string state_dir, uint32_t uid);
  // Writes `piece` and waits until it is written; false when the call is over.
  bool Send(v1::BackupStoreResponse piece);

  // The write in flight has completed, or the call is over.
  bool WriteSettled() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !writing_ || cancelled_; }

  ApiContext& api_;
  grpc::CallbackServerContext* const ctx_;
  absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  v1::BackupStoreResponse current_;  // the worker's, while no write is in flight
  std::thread worker_;
};

}  // namespace ktesio::daemon::api
