#include "api/follow_logs.h"

#include "engine/log_feed.h"
#include "ktesio/contract/error.h"

namespace ktesio::daemon::api {
namespace {

// Log batches are large; a follower this far behind is cut off rather than buffered forever.
constexpr size_t kMaxQueuedBatches = 4096;

}  // namespace

FollowLogsReactor::FollowLogsReactor(ApiContext& api, grpc::CallbackServerContext* ctx,
                                     const v1::FollowLogsRequest& request)
    : QueuedWriter(ctx, kMaxQueuedBatches), api_(api) {
  absl::StatusOr<uid_t> uid = Authorize(api, ctx);
  if (!uid.ok()) {
    End(uid.status());
    return;
  }
  auto link = this->link();
  engine::Engine* engine = api_.engine;
  // The reactor may be gone by the time this runs: touch it only through the link.
  engine->Post([engine, link, filter = request.filter()] {
    auto emit = [link](v1::FollowLogsResponse response) {
      WithReactor<v1::FollowLogsResponse>(link, [&](QueuedWriter& reactor) {
        if (!reactor.Enqueue(std::move(response))) {
          reactor.End(contract::MakeError(absl::StatusCode::kResourceExhausted,
                                          contract::reason::kLimitReached,
                                          "the client fell too far behind the log stream"));
        }
      });
    };
    auto end = [link](absl::Status status) {
      WithReactor<v1::FollowLogsResponse>(link,
                                          [&](QueuedWriter& reactor) { reactor.End(status); });
    };
    absl::StatusOr<logs::LogQuery> query = engine::LogQueryOf(filter);
    absl::StatusOr<uint64_t> id =
        query.ok() ? engine->StartFollow(filter.name(), *query, filter.no_retained(), emit, end)
                   : absl::StatusOr<uint64_t>(query.status());
    if (!id.ok()) {
      end(id.status());
      return;
    }
    bool alive = WithReactor<v1::FollowLogsResponse>(link, [&](QueuedWriter& reactor) {
      static_cast<FollowLogsReactor&>(reactor).follow_id_.store(*id);
    });
    if (!alive && *id != 0) {
      engine->StopFollow(*id);  // the client left before the follow started
    }
  });
}

void FollowLogsReactor::Stopped() {
  engine::Engine* engine = api_.engine;
  const uint64_t id = follow_id_.load();
  if (id != 0) {
    engine->Post([engine, id] { engine->StopFollow(id); });
  }
}

}  // namespace ktesio::daemon::api
