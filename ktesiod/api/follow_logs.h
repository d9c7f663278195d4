#pragma once

// The server-streaming FollowLogs call.

#include <atomic>

#include "api/queued_writer.h"
#include "ktesio/v1/logs.grpc.pb.h"

namespace ktesio::daemon::api {

class FollowLogsReactor final : public QueuedWriter<v1::FollowLogsResponse> {
 public:
  // Starts following on the engine thread. Call only from the FollowLogs handler.
  FollowLogsReactor(ApiContext& api, grpc::CallbackServerContext* ctx,
                    const v1::FollowLogsRequest& request);

 protected:
  void Stopped() override;

 private:
  ApiContext& api_;
  std::atomic<uint64_t> follow_id_{0};
};

}  // namespace ktesio::daemon::api
