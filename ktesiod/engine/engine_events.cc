// The engine's event subscriptions: replay from the persisted log, then live, never blocking
// the engine on a slow subscriber.

#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/json_writer.h"
#include "ktesio/contract/status_macros.h"
#include "logs/segments.h"

namespace ktesio::daemon::engine {
namespace {

constexpr int64_t kBatch = 512;

}  // namespace

absl::StatusOr<uint64_t> Engine::Subscribe(const v1::SubscribeEventsRequest& request,
                                           EmitEvents emit, EndEvents end) {
  KT_RETURN_IF_ERROR(CheckStreamLimit());
  if (!request.instance().empty()) {
    KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(request.instance()));
  }
  Subscription subscription;
  subscription.instance = request.instance();
  subscription.log = request.audit() ? store::EventLog::kAudit : store::EventLog::kEvents;
  v1::SubscribeEventsResponse pruned;  // the notice of a gap, sent before anything else
  if (request.has_since_cursor()) {
    subscription.cursor = static_cast<int64_t>(request.since_cursor());
    int64_t first = 0;
    KT_ASSIGN_OR_RETURN(std::string notice,
                        PrunedNotice(subscription.log, subscription.cursor, &first));
    if (!notice.empty()) {
      pruned.set_notice(notice);
      pruned.set_first_available_cursor(static_cast<uint64_t>(first));
    }
  } else {
    KT_ASSIGN_OR_RETURN(int64_t last, store_->LastCursor(subscription.log));
    subscription.cursor = last;
  }
  if (!pruned.notice().empty() && !emit(std::move(pruned))) {
    return contract::MakeError(absl::StatusCode::kInternal, contract::reason::kInternal,
                               "the subscriber could not take the first response");
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
    const PumpKey key{subscription.cursor, subscription.instance, subscription.log};
    PumpCache local;
    PumpCache& batches = cache != nullptr ? *cache : local;
    auto found = batches.find(key);
    if (found == batches.end()) {
      PumpBatch built;
      absl::StatusOr<std::vector<store::EventRow>> rows =
          store_->ReadEvents(subscription.cursor, subscription.instance, kBatch, subscription.log);
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

void Engine::Audit(uint32_t uid, std::string_view rpc, const std::string& instance,
                   const absl::Status& outcome) {
  const std::string result = outcome.ok() ? std::string("ok") : contract::ErrorReason(outcome);
  log_->info("audit uid={} rpc={} instance={} result={}", uid, rpc, instance, result);
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  contract::JsonWriter payload;
  payload.BeginObject().Key("schema_version").Int(1).Key("uid").Int(uid);
  payload.Key("rpc").String(rpc).Key("instance").String(instance).Key("result").String(result);
  payload.Key("at").String(logs::FormatLogTime(now)).EndObject();
  absl::StatusOr<int64_t> appended =
      store_->AppendEvent({0, now, instance, "audit", payload.str()}, store::EventLog::kAudit);
  if (!appended.ok()) {
    // The log line above is the record of last resort; the call itself already completed.
    log_->error("audit event not persisted rpc={} error={}", rpc,
                std::string(appended.status().message()));
    return;
  }
  PublishEvents();
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
