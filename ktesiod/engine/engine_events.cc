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

bool Engine::Pump(Subscription& subscription, PumpCache* cache) {
  while (true) {
    // Subscribers at the same cursor with the same filter (the live ones, typically) share one
    // read of the log and one built batch.
    const PumpKey key{subscription.cursor, subscription.instance};
    PumpCache local;
    PumpCache& batches = cache != nullptr ? *cache : local;
    auto found = batches.find(key);
    if (found == batches.end()) {
      PumpBatch built;
      absl::StatusOr<std::vector<store::EventRow>> rows =
          store_->ReadEvents(subscription.cursor, subscription.instance, kBatch);
      if (!rows.ok()) {
        built.status = rows.status();
      } else {
        built.count = rows->size();
        for (store::EventRow& row : *rows) {
          v1::Event* event = built.batch.add_events();
          event->set_cursor(static_cast<uint64_t>(row.cursor));
          event->set_type(std::move(row.type));
          event->set_instance(std::move(row.instance));
          event->set_at_unix_ms(row.at_ms);
          event->set_payload_json(std::move(row.payload_json));
        }
        built.next = rows->empty() ? subscription.cursor : rows->back().cursor;
      }
      found = batches.emplace(key, std::move(built)).first;
    }
    const PumpBatch& shared = found->second;
    if (!shared.status.ok()) {
      subscription.end(v1::SubscribeEventsResponse(), shared.status);
      return false;
    }
    if (shared.count == 0) {
      return true;
    }
    if (!subscription.emit(shared.batch)) {
      // Too far behind: say so and end; the client resumes from the last cursor it saw.
      v1::SubscribeEventsResponse lagged;
      lagged.set_lagged(true);
      subscription.end(std::move(lagged), absl::OkStatus());
      return false;
    }
    subscription.cursor = shared.next;
    if (static_cast<int64_t>(shared.count) < kBatch) {
      return true;
    }
  }
}

void Engine::PublishEvents() {
  PumpCache cache;
  for (auto it = subscriptions_.begin(); it != subscriptions_.end();) {
    if (Pump(it->second, &cache)) {
      ++it;
    } else {
      it = subscriptions_.erase(it);
    }
  }
}

}  // namespace ktesio::daemon::engine
