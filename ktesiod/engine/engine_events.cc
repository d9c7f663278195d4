// The engine's event subscriptions: replay from the persisted log, then live, never blocking
// the engine on a slow subscriber.

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "ktesio/contract/error.h"

namespace ktesio::daemon::engine {
namespace {

constexpr int64_t kBatch = 512;

}  // namespace

absl::StatusOr<uint64_t> Engine::Subscribe(const v1::SubscribeEventsRequest& request,
                                           EmitEvents emit, EndEvents end) {
  if (!request.instance().empty()) {
    absl::StatusOr<store::InstanceRow> row = registry_.Find(request.instance());
    if (!row.ok()) {
      return row.status();
    }
  }
  Subscription subscription;
  subscription.instance = request.instance();
  if (request.has_since_cursor()) {
    subscription.cursor = static_cast<int64_t>(request.since_cursor());
  } else {
    absl::StatusOr<int64_t> last = store_->LastCursor();
    if (!last.ok()) {
      return last.status();
    }
    subscription.cursor = *last;
  }
  subscription.emit = std::move(emit);
  subscription.end = std::move(end);
  const uint64_t id = next_subscription_++;
  auto [it, inserted] = subscriptions_.emplace(id, std::move(subscription));
  if (!Pump(it->second)) {
    subscriptions_.erase(it);
  }
  return id;
}

void Engine::Unsubscribe(uint64_t id) { subscriptions_.erase(id); }

bool Engine::Pump(Subscription& subscription) {
  while (true) {
    absl::StatusOr<std::vector<store::EventRow>> rows =
        store_->ReadEvents(subscription.cursor, subscription.instance, kBatch);
    if (!rows.ok()) {
      subscription.end(v1::SubscribeEventsResponse(), rows.status());
      return false;
    }
    if (rows->empty()) {
      return true;
    }
    v1::SubscribeEventsResponse batch;
    for (store::EventRow& row : *rows) {
      v1::Event* event = batch.add_events();
      event->set_cursor(static_cast<uint64_t>(row.cursor));
      event->set_type(std::move(row.type));
      event->set_instance(std::move(row.instance));
      event->set_at_unix_ms(row.at_ms);
      event->set_payload_json(std::move(row.payload_json));
    }
    const int64_t next = rows->back().cursor;
    if (!subscription.emit(std::move(batch))) {
      // Too far behind: say so and end; the client resumes from the last cursor it saw.
      v1::SubscribeEventsResponse lagged;
      lagged.set_lagged(true);
      subscription.end(std::move(lagged), absl::OkStatus());
      return false;
    }
    subscription.cursor = next;
    if (static_cast<int64_t>(rows->size()) < kBatch) {
      return true;
    }
  }
}

void Engine::PublishEvents() {
  for (auto it = subscriptions_.begin(); it != subscriptions_.end();) {
    if (Pump(it->second)) {
      ++it;
    } else {
      it = subscriptions_.erase(it);
    }
  }
}

}  // namespace ktesio::daemon::engine
