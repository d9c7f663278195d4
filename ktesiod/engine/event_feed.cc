#include "engine/event_feed.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/json_writer.h"
#include "ktesio/contract/status_macros.h"
#include "ktesio/contract/text.h"
#include "logs/segments.h"
#include "paths/paths.h"

namespace ktesio::daemon::engine {
namespace {

constexpr int64_t kBatch = store::kEventReadBatch;
// What an audit record keeps of a name that is not a valid instance name.
constexpr size_t kAuditedNameBytes = 128;

}  // namespace

EventFeed::EventFeed(store::Store* store, std::shared_ptr<spdlog::logger> log)
    : store_(store), log_(std::move(log)) {}

absl::StatusOr<uint64_t> EventFeed::Subscribe(Subscriber subscriber) {
  Subscription subscription;
  subscription.instance = std::move(subscriber.instance);
  subscription.log = subscriber.log;
  v1::SubscribeEventsResponse pruned;  // the notice of a gap, sent before anything else
  if (subscriber.since_cursor.has_value()) {
    subscription.cursor = *subscriber.since_cursor;
    int64_t first = 0;
    KT_ASSIGN_OR_RETURN(std::string notice,
                        PrunedNotice(subscription.log, subscription.cursor, &first));
    if (!notice.empty()) {
      pruned.set_notice(notice);
      pruned.set_first_available_cursor(static_cast<uint64_t>(first));
    }
  } else {
    KT_ASSIGN_OR_RETURN(subscription.cursor, store_->LastCursor(subscription.log));
  }
  if (!pruned.notice().empty() && !subscriber.emit(std::move(pruned))) {
    return contract::MakeError(absl::StatusCode::kInternal, contract::reason::kInternal,
                               "the subscriber could not take the first response");
  }
  subscription.emit = std::move(subscriber.emit);
  subscription.end = std::move(subscriber.end);
  const uint64_t id = next_id_++;
  auto [it, inserted] = subscriptions_.emplace(id, std::move(subscription));
  if (!Pump(it->second, nullptr)) {
    subscriptions_.erase(it);
  }
  return id;
}

void EventFeed::Unsubscribe(uint64_t id) { subscriptions_.erase(id); }

void EventFeed::Publish() {
  BatchCache cache;
  for (auto it = subscriptions_.begin(); it != subscriptions_.end();) {
    if (Pump(it->second, &cache)) {
      ++it;
    } else {
      it = subscriptions_.erase(it);
    }
  }
}

const EventFeed::Batch& EventFeed::Read(const Subscription& subscription, BatchCache* cache) {
  const BatchKey key{subscription.cursor, subscription.instance, subscription.log};
  if (auto found = cache->find(key); found != cache->end()) {
    return found->second;
  }
  Batch built;
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
  return cache->emplace(key, std::move(built)).first->second;
}

bool EventFeed::Pump(Subscription& subscription, BatchCache* cache) {
  while (true) {
    BatchCache local;  // a lone replay keeps one batch at a time
    const Batch& shared = Read(subscription, cache != nullptr ? cache : &local);
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

void EventFeed::Audit(uint32_t uid, std::string_view rpc, const std::string& name,
                      const absl::Status& outcome) {
  const std::string result = outcome.ok() ? std::string("ok") : contract::ErrorReason(outcome);
  // A refused call's name is whatever the client sent: a newline in it forged log lines, and
  // megabytes of it went into the log and the store. Escaped and bounded, as error messages are.
  std::string instance = name;
  if (!ValidateInstanceName(name).ok()) {
    // Spaces and '=' too: `x result=ok` must not read as a field of the line.
    instance = absl::StrReplaceAll(contract::text::Escape(name.substr(0, kAuditedNameBytes)),
                                   {{" ", "\\x20"}, {"=", "\\x3d"}});
    if (name.size() > kAuditedNameBytes) {
      absl::StrAppend(&instance, "... (", name.size(), " bytes)");
    }
  }
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
  Publish();
}

absl::StatusOr<std::string> EventFeed::PrunedNotice(store::EventLog log, int64_t since,
                                                    int64_t* first_available) {
  KT_ASSIGN_OR_RETURN(*first_available, store_->FirstCursor(log));
  if (*first_available == 0 || since >= *first_available - 1) {  // (since + 1 may overflow)
    return std::string();
  }
  return absl::StrCat("events after cursor ", since, " up to ", *first_available - 1,
                      " were pruned by the retention policy; the replay starts at cursor ",
                      *first_available);
}

}  // namespace ktesio::daemon::engine
