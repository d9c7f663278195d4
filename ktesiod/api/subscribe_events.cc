#include "api/subscribe_events.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"

namespace ktesio::daemon::api {
namespace {

// Batches of up to 512 events: a subscriber may be this many batches behind before it is told
// it lagged. The engine never waits for it.
constexpr size_t kMaxQueuedBatches = 256;

}  // namespace

SubscribeEventsReactor::SubscribeEventsReactor(ApiContext& api, grpc::CallbackServerContext* ctx,
                                               const v1::SubscribeEventsRequest& request)
    : QueuedWriter(ctx, kMaxQueuedBatches), api_(api) {
  absl::StatusOr<uid_t> uid = Authorize(api, ctx);
  if (!uid.ok()) {
    End(uid.status());
    return;
  }
  // Cursors are SQLite rowids: signed 64-bit. A larger value is no cursor at all (cast, it read
  // as -1 and replayed everything).
  if (request.has_since_cursor() &&
      request.since_cursor() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    End(contract::MakeError(absl::StatusCode::kInvalidArgument, contract::reason::kInvalidArgument,
                            absl::StrCat("since_cursor ", request.since_cursor(),
                                         " is out of range (cursors are at most ",
                                         std::numeric_limits<int64_t>::max(), ")")));
    return;
  }
  auto link = this->link();
  engine::Engine* engine = api_.engine;
  engine->Post([engine, link, request] {
    auto emit = [link](v1::SubscribeEventsResponse batch) {
      bool taken = false;
      WithReactor<v1::SubscribeEventsResponse>(
          link, [&](QueuedWriter& reactor) { taken = reactor.Enqueue(std::move(batch)); });
      return taken;
    };
    auto end = [link](v1::SubscribeEventsResponse last, absl::Status status) {
      WithReactor<v1::SubscribeEventsResponse>(link, [&](QueuedWriter& reactor) {
        if (last.lagged() || !last.events().empty()) {
          reactor.EndWith(std::move(last), status);
        } else {
          reactor.End(status);
        }
      });
    };
    engine::EventFeed::Subscriber subscriber;
    subscriber.instance = request.instance();
    subscriber.log = request.audit() ? store::EventLog::kAudit : store::EventLog::kEvents;
    if (request.has_since_cursor()) {
      subscriber.since_cursor = static_cast<int64_t>(request.since_cursor());
    }
    subscriber.emit = emit;
    subscriber.end = end;
    absl::StatusOr<uint64_t> id = engine->Subscribe(std::move(subscriber));
    if (!id.ok()) {
      end(v1::SubscribeEventsResponse(), id.status());
      return;
    }
    bool alive = WithReactor<v1::SubscribeEventsResponse>(link, [&](QueuedWriter& reactor) {
      static_cast<SubscribeEventsReactor&>(reactor).subscription_id_.store(*id);
    });
    if (!alive) {
      engine->Unsubscribe(*id);
    }
  });
}

void SubscribeEventsReactor::Stopped() {
  engine::Engine* engine = api_.engine;
  const uint64_t id = subscription_id_.load();
  if (id != 0) {
    engine->Post([engine, id] { engine->Unsubscribe(id); });
  }
}

}  // namespace ktesio::daemon::api
