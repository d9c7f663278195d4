#pragma once

// Event subscriptions and the audit trail, one owner on the engine thread. A subscriber gets the
// persisted log (events or audit) after its cursor, then every new event in commit order, in
// batches of up to 512. Emission never blocks the engine: a subscriber that refuses a batch is
// told it lagged and ended, and resumes from the last cursor it saw. Subscribers at the same
// cursor with the same filter share one read of the log and one built batch.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ktesio/v1/events.pb.h"
#include "spdlog/logger.h"
#include "store/store.h"

namespace ktesio::daemon::engine {

class EventFeed {
 public:
  // `store` and `log` outlive the feed.
  EventFeed(store::Store* store, std::shared_ptr<spdlog::logger> log);
  EventFeed(const EventFeed&) = delete;
  EventFeed& operator=(const EventFeed&) = delete;

  // Takes one batch; false when the subscriber cannot take more (it then lagged).
  using Emit = std::function<bool(v1::SubscribeEventsResponse)>;
  // The last word to a subscriber: a `lagged` response, or an empty one with the error that
  // ended the stream.
  using End = std::function<void(v1::SubscribeEventsResponse, absl::Status)>;

  struct Subscriber {
    std::string instance;  // "" = every instance
    store::EventLog log = store::EventLog::kEvents;
    // Replay everything after this cursor; unset = only what is committed from now on.
    std::optional<int64_t> since_cursor;
    Emit emit;
    End end;
  };

  // Sends the replay (preceded by a notice when retention pruned part of it) and registers the
  // subscriber. Returns its id for Unsubscribe; a subscriber that lagged or failed during the
  // replay was already ended and is not kept. Errors: the store's, before anything was sent.
  absl::StatusOr<uint64_t> Subscribe(Subscriber subscriber);
  void Unsubscribe(uint64_t id);

  // Sends every subscriber what was committed after its cursor; call after appending events.
  void Publish();

  // One `audit uid=… rpc=… instance=… result=…` log line and one persisted `audit` event per
  // mutating call, whatever its outcome (`name` may be empty, or not a valid name at all: such a
  // name is recorded escaped and cut to 128 bytes); then publishes it.
  void Audit(uint32_t uid, std::string_view rpc, const std::string& name,
             const absl::Status& outcome);

  size_t size() const { return subscriptions_.size(); }

  // The notice for a replay from `since` when older events were pruned ("" when none were);
  // `first_available` receives the oldest retained cursor.
  absl::StatusOr<std::string> PrunedNotice(store::EventLog log, int64_t since,
                                           int64_t* first_available);

 private:
  struct Subscription {
    std::string instance;
    store::EventLog log = store::EventLog::kEvents;
    int64_t cursor = 0;
    Emit emit;
    End end;
  };
  // One read of the log past a cursor, built into a batch, shared by subscribers at that cursor.
  struct Batch {
    absl::Status status;
    v1::SubscribeEventsResponse batch;
    size_t count = 0;
    int64_t next = 0;
  };
  using BatchKey = std::tuple<int64_t, std::string, store::EventLog>;  // cursor, instance, log
  using BatchCache = std::map<BatchKey, Batch>;

  // Sends a subscription everything after its cursor; false when it lagged or failed and was
  // ended.
  bool Pump(Subscription& subscription, BatchCache* cache);
  const Batch& Read(const Subscription& subscription, BatchCache* cache);

  store::Store* store_;
  std::shared_ptr<spdlog::logger> log_;
  std::map<uint64_t, Subscription> subscriptions_;
  uint64_t next_id_ = 1;
};

}  // namespace ktesio::daemon::engine
