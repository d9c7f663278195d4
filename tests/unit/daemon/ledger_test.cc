// The usage ledger's write side over a real SQLite store and real usage files: the
// usage_update events of one ingestion share one events row (a span, schema 10) and read back
// exactly as one row per event would — cursors, order against budget_breach events, documents,
// retention's count limit, the metrics counts — and a damaged span is reported, not guessed at.

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/json_writer.h"
#include "logs/segments.h"
#include "metering/ingest.h"
#include "metering/ledger.h"
#include "status_assertions.h"
#include "store/store.h"

namespace ktesio::daemon::metering {
namespace {

class LedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/kt-ledger-XXXXXX";
    dir_ = mkdtemp(templ);
    absl::StatusOr<std::unique_ptr<store::Store>> opened = store::Store::Open(dir_ + "/state.db");
    KT_ASSERT_OK(opened.status());
    store_ = std::move(*opened);
    row_.name = "u";
    row_.kind = "usage";
    row_.state = "running";
    row_.home = dir_ + "/home";
    row_.current_run = 1;
    KT_ASSERT_OK(store_->InsertInstance(row_));
    KT_ASSERT_OK(store_->BeginRun(row_.id, 1, 0));
    KT_ASSERT_OK(store_->AppendEvent({0, 5, "u", "transition", "{}"}).status());  // cursor 1
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Appends usage lines with sequences [from, from + count), each `input` tokens in, 1 out.
  void Write(int from, int count, int input) {
    std::ofstream out(UsageFilePath(dir_, 1), std::ios::app);
    for (int i = from; i < from + count; ++i) {
      out << "KTESIO_USAGE {\"sequence\":" << i << ",\"input_tokens\":" << input
          << ",\"output_tokens\":1}\n";
    }
  }
  IngestResult Ingest(const budget::Limits& limits = {}) {
    absl::StatusOr<IngestResult> result =
        IngestUsageFile(*store_, row_, 1, UsageFilePath(dir_, 1), "self-reported", limits, kNow);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : IngestResult{};
  }
  std::vector<store::EventRow> Events(int64_t after = 0, int64_t limit = 1000) {
    absl::StatusOr<std::vector<store::EventRow>> events = store_->ReadEvents(after, "", limit);
    EXPECT_TRUE(events.ok()) << events.status();
    return events.ok() ? *events : std::vector<store::EventRow>{};
  }

  static constexpr int64_t kNow = 1'764'000'000'000;
  std::string dir_;
  std::unique_ptr<store::Store> store_;
  store::InstanceRow row_;
};

TEST_F(LedgerTest, OneIngestionsEventsReadBackOneByOneWithConsecutiveCursors) {
  Write(0, 5, 10);
  EXPECT_EQ(Ingest().accepted, 5u);
  const std::vector<store::EventRow> events = Events();
  ASSERT_EQ(events.size(), 6u);
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_EQ(events[i].cursor, static_cast<int64_t>(i + 1));
    EXPECT_EQ(events[i].type, "usage_update");
    EXPECT_EQ(events[i].instance, "u");
    EXPECT_EQ(events[i].at_ms, kNow);
  }
  // Each document is exactly what the JSON writer makes of the event.
  contract::JsonWriter want;
  want.BeginObject().Key("schema_version").Int(1).Key("instance").String("u");
  want.Key("run_id").Int(1).Key("input_tokens").Uint(10).Key("output_tokens").Uint(1);
  want.Key("metering_source").String("self-reported").Key("sequence").Uint(3);
  want.Key("occurred_at").String(logs::FormatLogTime(kNow)).EndObject();
  EXPECT_EQ(events[4].payload_json, want.str());

  // From inside the span, and a limit that ends inside it.
  std::vector<store::EventRow> tail = Events(3);
  ASSERT_EQ(tail.size(), 3u);
  EXPECT_EQ(tail[0].cursor, 4);
  EXPECT_EQ(tail[0].payload_json, events[3].payload_json);
  std::vector<store::EventRow> two = Events(2, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].cursor, 4);
  // Replays record nothing twice; the next event continues after the span.
  Write(3, 2, 10);
  const IngestResult again = Ingest();
  EXPECT_EQ(again.accepted, 0u);
  EXPECT_EQ(again.duplicates, 2u);
  absl::StatusOr<int64_t> next = store_->AppendEvent({0, kNow, "u", "transition", "{}"});
  KT_ASSERT_OK(next.status());
  EXPECT_EQ(*next, 7);
  absl::StatusOr<store::Store::EventCounts> counts = store_->CountEvents(0, true);
  KT_ASSERT_OK(counts.status());
  EXPECT_EQ(counts->by_type["usage_update"], 5u);
  EXPECT_EQ(counts->by_type["transition"], 2u);
  EXPECT_EQ(counts->last_cursor, 7);
}

TEST_F(LedgerTest, ABurstIsStoredInBoundedSpansAndReadsBackInFeedSizedBatches) {
  Write(0, 1300, 1);
  EXPECT_EQ(Ingest().accepted, 1300u);
  absl::StatusOr<store::Statement> rows =
      store_->db().Prepare("SELECT COUNT(*), MAX(span), SUM(span) FROM events");
  KT_ASSERT_OK(rows.status());
  KT_ASSERT_OK(rows->Step().status());
  EXPECT_EQ(rows->ColumnInt(0), 1 + 3);  // the transition, then 512 + 512 + 276
  EXPECT_EQ(rows->ColumnInt(1), LedgerWriter::kMaxSpan);
  EXPECT_EQ(rows->ColumnInt(2), 1301);
  int64_t cursor = 0;
  int64_t read = 0;
  while (true) {
    const std::vector<store::EventRow> batch = Events(cursor, store::kEventReadBatch);
    if (batch.empty()) {
      break;
    }
    for (const store::EventRow& event : batch) {
      EXPECT_EQ(event.cursor, cursor + 1);
      cursor = event.cursor;
    }
    read += static_cast<int64_t>(batch.size());
  }
  EXPECT_EQ(read, 1301);
}

TEST_F(LedgerTest, EverySequenceCountsOnceWhateverItsOrder) {
  // 150 new sequences (multi-row inserts and a remainder), then out of order: a repeat inside
  // the same batch, a gap filled, a replay of an old one.
  Write(10, 150, 1);
  {
    std::ofstream out(UsageFilePath(dir_, 1), std::ios::app);
    out << "KTESIO_USAGE {\"sequence\":200,\"input_tokens\":5,\"output_tokens\":0}\n"
        << "KTESIO_USAGE {\"sequence\":200,\"input_tokens\":7,\"output_tokens\":0}\n"
        << "KTESIO_USAGE {\"sequence\":3,\"input_tokens\":9,\"output_tokens\":0}\n"
        << "KTESIO_USAGE {\"sequence\":12,\"input_tokens\":100,\"output_tokens\":0}\n"
        << "KTESIO_USAGE {\"sequence\":201,\"input_tokens\":11,\"output_tokens\":0}\n";
  }
  IngestResult result = Ingest();
  EXPECT_EQ(result.accepted, 153u);
  EXPECT_EQ(result.duplicates, 2u);
  absl::StatusOr<store::Store::UsageTotals> totals = store_->Usage(row_.id, 1);
  KT_ASSERT_OK(totals.status());
  EXPECT_EQ(totals->run_input, 150u + 5 + 9 + 11);
  EXPECT_EQ(totals->run_output, 150u);
  EXPECT_EQ(Events().size(), 1u + 153);
  // A later ingestion starts above the highest sequence recorded, and still refuses replays.
  Write(150, 15, 1);  // 150..159 recorded already, 160..164 new
  result = Ingest();
  EXPECT_EQ(result.accepted, 5u);
  EXPECT_EQ(result.duplicates, 10u);
  absl::StatusOr<int64_t> next = store_->NextSequence(row_.id, 1);
  KT_ASSERT_OK(next.status());
  EXPECT_EQ(*next, 202);
}

TEST_F(LedgerTest, ABreachComesRightAfterTheUsageThatCrossedIt) {
  budget::Limits limits;
  limits.tokens_per_run = 25;  // 11 tokens per event: the third crosses it
  limits.action = budget::Action::kWarn;
  Write(0, 5, 10);
  const IngestResult result = Ingest(limits);
  EXPECT_EQ(result.accepted, 5u);
  ASSERT_EQ(result.breaches.size(), 1u);
  const std::vector<store::EventRow> events = Events();
  std::vector<std::string> types;
  for (const store::EventRow& event : events) {
    types.push_back(event.type);
    EXPECT_EQ(event.cursor, static_cast<int64_t>(types.size()));
  }
  EXPECT_EQ(types,
            (std::vector<std::string>{"transition", "usage_update", "usage_update", "usage_update",
                                      "budget_breach", "usage_update", "usage_update"}));
  EXPECT_NE(events[3].payload_json.find("\"sequence\":2,"), std::string::npos);
  EXPECT_NE(events[4].payload_json.find("\"observed\":33"), std::string::npos);
}

TEST_F(LedgerTest, RetentionKeepsExactlyTheNewestEventsEvenInsideASpan) {
  Write(0, 10, 1);
  Ingest();  // cursors 2..11 in one row
  absl::StatusOr<int64_t> pruned = store_->PruneEvents(store::EventLog::kEvents, 0, 4, 100);
  KT_ASSERT_OK(pruned.status());
  EXPECT_EQ(*pruned, 7);  // the transition and the six oldest usage events
  const std::vector<store::EventRow> events = Events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events.front().cursor, 8);
  EXPECT_NE(events.front().payload_json.find("\"sequence\":6,"), std::string::npos);
  EXPECT_EQ(events.back().cursor, 11);
  absl::StatusOr<int64_t> first = store_->FirstCursor(store::EventLog::kEvents);
  KT_ASSERT_OK(first.status());
  EXPECT_EQ(*first, 8);
  // Nothing over the limit: nothing more goes.
  pruned = store_->PruneEvents(store::EventLog::kEvents, 0, 4, 100);
  KT_ASSERT_OK(pruned.status());
  EXPECT_EQ(*pruned, 0);
  EXPECT_EQ(Events().size(), 4u);
}

TEST_F(LedgerTest, ASpanWhoseDocumentsDoNotMatchItsCountIsReportedNotGuessed) {
  absl::StatusOr<int64_t> cursor =
      store_->AppendEventSpan(kNow, "u", "usage_update", "{\"a\":1}\n{\"a\":2}", 3);
  KT_ASSERT_OK(cursor.status());
  EXPECT_EQ(*cursor, 4);
  absl::StatusOr<std::vector<store::EventRow>> read = store_->ReadEvents(1, "", 10);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(read.status().message().find("holds 2 documents for a span of 3"), std::string::npos)
      << read.status();
  EXPECT_FALSE(store_->AppendEventSpan(kNow, "u", "usage_update", "", 0).ok());
}

}  // namespace
}  // namespace ktesio::daemon::metering
