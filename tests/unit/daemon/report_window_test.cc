// The proxy's report window: how late finished calls reach the ledger (report_window.h), on a
// made-up clock.

#include "metering/proxy/report_window.h"

#include <chrono>

#include "gtest/gtest.h"

namespace ktesio::daemon::metering {
namespace {

using std::chrono::milliseconds;

class ReportWindowTest : public ::testing::Test {
 protected:
  // A batch begins now, waits its window and is handed over with `records` records; the next
  // batch begins `gap` later. Returns the window the batch waited.
  milliseconds Batch(ReportWindow& window, size_t records, milliseconds gap = milliseconds(0)) {
    const milliseconds waited = window.Begin(now_);
    now_ += waited;
    window.Handed(records, now_);
    now_ += gap;
    return waited;
  }

  ReportWindow::Clock::time_point now_ = ReportWindow::Clock::time_point() + std::chrono::hours(1);
};

TEST_F(ReportWindowTest, QuietCallsAreHandedOverAfterTheBaseWindow) {
  ReportWindow window(milliseconds(2), milliseconds(10));
  for (size_t records : {size_t{1}, size_t{3}, ReportWindow::kBusyBatch - 1, size_t{1}}) {
    EXPECT_EQ(Batch(window, records), milliseconds(2)) << records;
  }
}

TEST_F(ReportWindowTest, BusyBatchesWidenTheWindowUpToItsCeiling) {
  ReportWindow window(milliseconds(2), milliseconds(10));
  EXPECT_EQ(Batch(window, ReportWindow::kBusyBatch), milliseconds(2));
  EXPECT_EQ(Batch(window, 100), milliseconds(4));
  EXPECT_EQ(Batch(window, 200), milliseconds(8));
  EXPECT_EQ(Batch(window, 400), milliseconds(10));
  EXPECT_EQ(Batch(window, 400), milliseconds(10));
}

TEST_F(ReportWindowTest, ASmallBatchReturnsTheWindowToItsBase) {
  ReportWindow window(milliseconds(2), milliseconds(10));
  Batch(window, 100);
  Batch(window, 100);
  ASSERT_EQ(Batch(window, 1), milliseconds(8));
  EXPECT_EQ(Batch(window, 1), milliseconds(2));
}

TEST_F(ReportWindowTest, AQuietSpellAfterABurstReturnsTheWindowToItsBase) {
  ReportWindow window(milliseconds(2), milliseconds(10));
  Batch(window, 100);
  Batch(window, 100);
  Batch(window, 100, milliseconds(50));  // the burst ends with a full batch, then nothing
  EXPECT_EQ(Batch(window, 1), milliseconds(2)) << "the first call after the burst";
}

TEST_F(ReportWindowTest, CallsThatKeepComingKeepTheWideWindow) {
  ReportWindow window(milliseconds(2), milliseconds(10));
  Batch(window, 100, milliseconds(1));
  Batch(window, 100, milliseconds(1));
  EXPECT_EQ(Batch(window, 100, milliseconds(1)), milliseconds(8));
  EXPECT_EQ(Batch(window, 100, milliseconds(1)), milliseconds(10));
}

TEST_F(ReportWindowTest, ACeilingBelowTheBaseKeepsTheBase) {
  ReportWindow window(milliseconds(3000), milliseconds(10));
  EXPECT_EQ(Batch(window, 1000), milliseconds(3000));
  EXPECT_EQ(Batch(window, 1000), milliseconds(3000));
  EXPECT_EQ(Batch(window, 1), milliseconds(3000));
}

}  // namespace
}  // namespace ktesio::daemon::metering
