// The proxy's report window: how late finished calls reach the ledger (report_window.h).

#include "metering/proxy/report_window.h"

#include <chrono>

#include "gtest/gtest.h"

namespace ktesio::daemon::metering {
namespace {

using std::chrono::milliseconds;

TEST(ReportWindowTest, QuietCallsAreHandedOverAfterTheBaseWindow) {
  ReportWindow window(milliseconds(2), milliseconds(10));
  EXPECT_EQ(window.current(), milliseconds(2));
  for (size_t records : {size_t{1}, size_t{3}, ReportWindow::kBusyBatch - 1}) {
    window.Handed(records);
    EXPECT_EQ(window.current(), milliseconds(2)) << records;
  }
}

TEST(ReportWindowTest, BusyBatchesWidenTheWindowUpToItsCeiling) {
  ReportWindow window(milliseconds(2), milliseconds(10));
  window.Handed(ReportWindow::kBusyBatch);
  EXPECT_EQ(window.current(), milliseconds(4));
  window.Handed(100);
  EXPECT_EQ(window.current(), milliseconds(8));
  window.Handed(200);
  EXPECT_EQ(window.current(), milliseconds(10));
  window.Handed(400);
  EXPECT_EQ(window.current(), milliseconds(10));
}

TEST(ReportWindowTest, AQuietBatchReturnsTheWindowToItsBase) {
  ReportWindow window(milliseconds(2), milliseconds(10));
  window.Handed(100);
  window.Handed(100);
  ASSERT_EQ(window.current(), milliseconds(8));
  window.Handed(1);
  EXPECT_EQ(window.current(), milliseconds(2));
}

TEST(ReportWindowTest, ACeilingBelowTheBaseKeepsTheBase) {
  ReportWindow window(milliseconds(3000), milliseconds(10));
  window.Handed(1000);
  EXPECT_EQ(window.current(), milliseconds(3000));
  window.Handed(1);
  EXPECT_EQ(window.current(), milliseconds(3000));
}

}  // namespace
}  // namespace ktesio::daemon::metering
