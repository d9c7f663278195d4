#pragma once

// The server-streaming BackupStore call: a worker thread writes a consistent copy of state.db
// (store::WriteConsistentCopy, a read-only connection of its own: the engine keeps writing) to
// a temporary file in the state dir, streams it in 1 MiB pieces, one write in flight at a time,
// and removes it.

#include <condition_variable>
#include <mutex>
#include <thread>

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

  ApiContext& api_;
  std::mutex mu_;
  std::condition_variable done_writing_;
  bool writing_ = false;
  bool cancelled_ = false;
  bool finished_ = false;
  v1::BackupStoreResponse current_;
  std::thread worker_;
};

}  // namespace ktesio::daemon::api
