#pragma once

// The server-streaming FollowLogs call: a write reactor fed from the engine thread. Writes are
// queued and sent one at a time (gRPC allows one outstanding write); a client that goes away
// cancels the engine-side follower.

#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "api/call.h"
#include "ktesio/v1/logs.grpc.pb.h"

namespace ktesio::daemon::api {

class FollowLogsReactor final : public grpc::ServerWriteReactor<v1::FollowLogsResponse> {
 public:
  // Starts following on the engine thread. Call only from the FollowLogs handler.
  FollowLogsReactor(ApiContext& api, grpc::CallbackServerContext* ctx,
                    const v1::FollowLogsRequest& request);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // Shared with engine-side callbacks; `reactor` becomes null once the call is done.
  struct Link {
    std::mutex mu;
    FollowLogsReactor* reactor = nullptr;
  };

  void Enqueue(v1::FollowLogsResponse response);
  void End(const absl::Status& status);

  ApiContext& api_;
  std::shared_ptr<Link> link_;
  std::mutex mu_;
  std::deque<v1::FollowLogsResponse> queue_;
  bool writing_ = false;
  std::optional<grpc::Status> final_;
  bool finished_ = false;
  uint64_t follow_id_ = 0;  // engine thread only
};

}  // namespace ktesio::daemon::api
