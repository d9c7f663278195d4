// The engine's event feed over a real store: replay, live publication, per-instance filters,
// lagging subscribers, retention gaps and the audit trail.

#include "engine/event_feed.h"

#include <filesystem>
#include <limits>
#include <sstream>

#include "gtest/gtest.h"
#include "ktesio/contract/error.h"
#include "spdlog/sinks/ostream_sink.h"
#include "status_assertions.h"

namespace ktesio::daemon::engine {
namespace {

class EventFeedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/kt-feed-XXXXXX";
    dir_ = mkdtemp(templ);
    store_ = std::move(store::Store::Open(dir_ + "/state.db")).value();
    log_ = std::make_shared<spdlog::logger>(
        "engine", std::make_shared<spdlog::sinks::ostream_sink_st>(log_text_));
    log_->set_pattern("%v");
    feed_ = std::make_unique<EventFeed>(store_.get(), log_);
  }
  void TearDown() override {
    feed_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  int64_t Append(const std::string& instance, const std::string& type, int64_t at_ms = 1) {
    return store_->AppendEvent({0, at_ms, instance, type, "{}"}).value();
  }

  // A subscriber that records what it is sent and takes at most `capacity` batches.
  struct Recorder {
    std::vector<v1::SubscribeEventsResponse> batches;
    std::vector<v1::SubscribeEventsResponse> last;
    std::vector<absl::Status> ends;
    size_t capacity = 1000;
    std::vector<uint64_t> Cursors() const {
      std::vector<uint64_t> cursors;
      for (const auto& batch : batches) {
        for (const v1::Event& event : batch.events()) {
          cursors.push_back(event.cursor());
        }
      }
      return cursors;
    }
  };
  EventFeed::Subscriber To(Recorder* recorder, std::string instance = "",
                           std::optional<int64_t> since = std::nullopt,
                           store::EventLog log = store::EventLog::kEvents) {
    EventFeed::Subscriber subscriber;
    subscriber.instance = std::move(instance);
    subscriber.log = log;
    subscriber.since_cursor = since;
    subscriber.emit = [recorder](v1::SubscribeEventsResponse batch) {
      if (recorder->batches.size() >= recorder->capacity) {
        return false;
      }
      recorder->batches.push_back(std::move(batch));
      return true;
    };
    subscriber.end = [recorder](v1::SubscribeEventsResponse last, absl::Status status) {
      recorder->last.push_back(std::move(last));
      recorder->ends.push_back(std::move(status));
    };
    return subscriber;
  }

  std::string dir_;
  std::unique_ptr<store::Store> store_;
  std::ostringstream log_text_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<EventFeed> feed_;
};

TEST_F(EventFeedTest, ASubscriberFromNowGetsOnlyWhatIsCommittedAfterIt) {
  Append("a", "lifecycle");
  Recorder recorder;
  KT_ASSERT_OK(feed_->Subscribe(To(&recorder)).status());
  EXPECT_TRUE(recorder.batches.empty());
  const int64_t second = Append("a", "lifecycle");
  feed_->Publish();
  EXPECT_EQ(recorder.Cursors(), std::vector<uint64_t>{static_cast<uint64_t>(second)});
  feed_->Publish();  // nothing new: nothing sent again
  EXPECT_EQ(recorder.batches.size(), 1u);
  EXPECT_TRUE(recorder.ends.empty());
}

TEST_F(EventFeedTest, AReplayFromACursorSendsEverythingAfterItInOrderAcrossBatches) {
  std::vector<uint64_t> expected;
  for (int i = 0; i < 1200; ++i) {  // more than two batches of 512
    const int64_t cursor = Append(i % 2 == 0 ? "a" : "b", "usage");
    if (i >= 100) {
      expected.push_back(static_cast<uint64_t>(cursor));
    }
  }
  Recorder recorder;
  KT_ASSERT_OK(
      feed_->Subscribe(To(&recorder, "", static_cast<int64_t>(expected.front()) - 1)).status());
  EXPECT_EQ(recorder.Cursors(), expected);
  EXPECT_EQ(recorder.batches.size(), 3u);
  EXPECT_EQ(feed_->size(), 1u);
}

TEST_F(EventFeedTest, AnInstanceFilterSeesOnlyThatInstance) {
  Recorder only_b;
  Recorder all;
  KT_ASSERT_OK(feed_->Subscribe(To(&only_b, "b")).status());
  KT_ASSERT_OK(feed_->Subscribe(To(&all)).status());
  Append("a", "lifecycle");
  const int64_t b = Append("b", "lifecycle");
  feed_->Publish();
  EXPECT_EQ(only_b.Cursors(), std::vector<uint64_t>{static_cast<uint64_t>(b)});
  EXPECT_EQ(all.Cursors().size(), 2u);
}

TEST_F(EventFeedTest, ASubscriberThatCannotKeepUpIsToldItLaggedAndDropped) {
  Recorder slow;
  slow.capacity = 1;
  Recorder fast;
  KT_ASSERT_OK(feed_->Subscribe(To(&slow)).status());
  KT_ASSERT_OK(feed_->Subscribe(To(&fast)).status());
  Append("a", "lifecycle");
  feed_->Publish();
  Append("a", "lifecycle");
  feed_->Publish();
  ASSERT_EQ(slow.ends.size(), 1u);
  KT_EXPECT_OK(slow.ends[0]);
  EXPECT_TRUE(slow.last[0].lagged());
  EXPECT_EQ(slow.batches.size(), 1u);
  EXPECT_EQ(fast.Cursors().size(), 2u);
  EXPECT_EQ(feed_->size(), 1u);
}

TEST_F(EventFeedTest, AnUnsubscribedSubscriberIsSentNothingMore) {
  Recorder recorder;
  absl::StatusOr<uint64_t> id = feed_->Subscribe(To(&recorder));
  KT_ASSERT_OK(id.status());
  feed_->Unsubscribe(*id);
  Append("a", "lifecycle");
  feed_->Publish();
  EXPECT_TRUE(recorder.batches.empty());
  EXPECT_TRUE(recorder.ends.empty());
  EXPECT_EQ(feed_->size(), 0u);
}

TEST_F(EventFeedTest, AReplayIntoPrunedHistoryStartsWithANoticeOfTheGap) {
  for (int64_t at = 1; at <= 5; ++at) {
    Append("a", "lifecycle", at);
  }
  absl::StatusOr<int64_t> pruned = store_->PruneEvents(store::EventLog::kEvents, 4, 0, 100);
  KT_ASSERT_OK(pruned.status());
  ASSERT_EQ(*pruned, 3);
  Recorder recorder;
  KT_ASSERT_OK(feed_->Subscribe(To(&recorder, "", 0)).status());
  ASSERT_EQ(recorder.batches.size(), 2u);
  EXPECT_EQ(recorder.batches[0].notice(),
            "events after cursor 0 up to 3 were pruned by the retention policy; the replay "
            "starts at cursor 4");
  EXPECT_EQ(recorder.batches[0].first_available_cursor(), 4u);
  EXPECT_EQ(recorder.Cursors(), (std::vector<uint64_t>{4, 5}));
  // A cursor inside what is retained has no gap.
  Recorder later;
  KT_ASSERT_OK(feed_->Subscribe(To(&later, "", 3)).status());
  ASSERT_EQ(later.batches.size(), 1u);
  EXPECT_TRUE(later.batches[0].notice().empty());
  // The largest cursor is past everything: no gap to report (since + 1 overflowed before).
  Recorder last;
  KT_ASSERT_OK(feed_->Subscribe(To(&last, "", std::numeric_limits<int64_t>::max())).status());
  EXPECT_TRUE(last.batches.empty() || last.batches[0].notice().empty());
  EXPECT_TRUE(last.Cursors().empty());
}

TEST_F(EventFeedTest, EveryAuditIsLoggedPersistedInTheAuditLogAndPublished) {
  Recorder audit;
  Recorder events;
  KT_ASSERT_OK(feed_->Subscribe(To(&audit, "", std::nullopt, store::EventLog::kAudit)).status());
  KT_ASSERT_OK(feed_->Subscribe(To(&events)).status());
  feed_->Audit(1000, "StartAgent", "a", absl::OkStatus());
  feed_->Audit(1000, "StopAgent", "b",
               contract::MakeError(absl::StatusCode::kNotFound, contract::reason::kNotFound,
                                   "no such instance"));
  const std::vector<uint64_t> cursors = audit.Cursors();
  ASSERT_EQ(cursors.size(), 2u);
  EXPECT_TRUE(events.batches.empty());
  EXPECT_EQ(audit.batches[0].events(0).type(), "audit");
  EXPECT_EQ(audit.batches[0].events(0).instance(), "a");
  EXPECT_NE(audit.batches[0].events(0).payload_json().find(R"("result":"ok")"), std::string::npos);
  EXPECT_NE(audit.batches[1].events(0).payload_json().find(R"("result":"NOT_FOUND")"),
            std::string::npos);
  EXPECT_NE(log_text_.str().find("audit uid=1000 rpc=StartAgent instance=a result=ok"),
            std::string::npos)
      << log_text_.str();
  EXPECT_NE(log_text_.str().find("audit uid=1000 rpc=StopAgent instance=b result=NOT_FOUND"),
            std::string::npos)
      << log_text_.str();
}

TEST_F(EventFeedTest, ARefusedNameIsAuditedEscapedAndBounded) {
  // The name of a refused call is whatever the client sent: it must not forge a log line (a
  // newline and a fake record after it) nor put megabytes into the log and the store.
  Recorder audit;
  KT_ASSERT_OK(feed_->Subscribe(To(&audit, "", std::nullopt, store::EventLog::kAudit)).status());
  const absl::Status refused = contract::MakeError(absl::StatusCode::kInvalidArgument,
                                                   contract::reason::kInvalidName, "bad name");
  feed_->Audit(1000, "StartAgent",
               "zz result=ok\ninfo engine: audit uid=0 rpc=RemoveAgent instance=prod", refused);
  feed_->Audit(1000, "StartAgent", std::string(3000000, 'n'), refused);
  const std::string log = log_text_.str();
  EXPECT_EQ(log.find("\ninfo engine: audit uid=0"), std::string::npos) << log;
  EXPECT_NE(log.find("instance=zz\\x20result\\x3dok\\ninfo\\x20engine:"
                     "\\x20audit\\x20uid\\x3d0\\x20rpc\\x3dRemoveAgent\\x20instance\\x3dprod "
                     "result=INVALID_NAME\n"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find(" result=ok"), std::string::npos) << log;
  EXPECT_LT(log.size(), 2000u);
  EXPECT_NE(log.find("... (3000000 bytes) result=INVALID_NAME"), std::string::npos);
  ASSERT_EQ(audit.Cursors().size(), 2u);
  EXPECT_EQ(audit.batches[0].events(0).instance(),
            "zz\\x20result\\x3dok\\ninfo\\x20engine:"
            "\\x20audit\\x20uid\\x3d0\\x20rpc\\x3dRemoveAgent\\x20instance\\x3dprod");
  EXPECT_EQ(audit.batches[1].events(0).instance(), std::string(128, 'n') + "... (3000000 bytes)");
  EXPECT_LT(audit.batches[1].events(0).payload_json().size(), 400u);
  // A valid name is recorded as it is.
  feed_->Audit(1000, "StartAgent", "web-1", absl::OkStatus());
  EXPECT_NE(log_text_.str().find("instance=web-1 result=ok"), std::string::npos);
}

}  // namespace
}  // namespace ktesio::daemon::engine
