// The metering proxy's connection admission (metering/proxy/admission.h) with a fake clock.

#include "metering/proxy/admission.h"

#include "gtest/gtest.h"

namespace ktesio::daemon::metering {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class AdmissionTest : public ::testing::Test {
 protected:
  std::chrono::steady_clock::time_point now_ =
      std::chrono::steady_clock::time_point() + seconds(100);
  Admission admission_{AdmissionLimits{2, 3}, [this] { return now_; }};
};

TEST_F(AdmissionTest, CapsPerInstanceAndInTotal) {
  size_t a = 0;
  size_t b = 0;
  EXPECT_TRUE(admission_.TryAdmit(&a));
  EXPECT_TRUE(admission_.TryAdmit(&a));
  EXPECT_FALSE(admission_.TryAdmit(&a)) << "per-instance cap";
  EXPECT_TRUE(admission_.TryAdmit(&b));
  EXPECT_FALSE(admission_.TryAdmit(&b)) << "total cap";
  admission_.Release(&a);
  EXPECT_TRUE(admission_.TryAdmit(&b)) << "a released slot is free again";
  Admission::Pressure pressure = admission_.Snapshot();
  EXPECT_EQ(pressure.open, 3u);
  EXPECT_EQ(pressure.refused_total, 2u);
  EXPECT_TRUE(pressure.recent);
  now_ += seconds(61);
  EXPECT_FALSE(admission_.Snapshot().recent) << "a minute without trouble is not recent";
}

TEST_F(AdmissionTest, ResourceErrorsBackOffExponentiallyUpToASecond) {
  EXPECT_EQ(admission_.OnResourceError(), milliseconds(10));
  EXPECT_EQ(admission_.OnResourceError(), milliseconds(20));
  for (int i = 0; i < 20; ++i) {
    admission_.OnResourceError();
  }
  EXPECT_EQ(admission_.OnResourceError(), milliseconds(1000));
  admission_.OnAccepted();
  EXPECT_EQ(admission_.OnResourceError(), milliseconds(10)) << "a success resets the backoff";
}

TEST_F(AdmissionTest, AtMostOneReportPerIntervalWithCounts) {
  EXPECT_EQ(admission_.DueReport(""), "") << "nothing happened";
  size_t a = 2;  // already at the per-instance cap
  for (int i = 0; i < 1000; ++i) {
    admission_.TryAdmit(&a);
  }
  EXPECT_TRUE(admission_.HasUnreported());
  const std::string first = admission_.DueReport("");
  EXPECT_FALSE(admission_.HasUnreported());
  EXPECT_NE(first.find("refused 1000 connections over the caps (per agent 2, total 3)"),
            std::string::npos)
      << first;
  admission_.TryAdmit(&a);
  admission_.OnResourceError();
  EXPECT_EQ(admission_.DueReport("Too many open files"), "") << "within the interval";
  EXPECT_TRUE(admission_.HasUnreported()) << "held back, still owed";
  now_ += seconds(10);
  const std::string second = admission_.DueReport("Too many open files");
  EXPECT_NE(second.find("refused 1 connection"), std::string::npos) << second;
  EXPECT_NE(second.find("1 accept failed (Too many open files"), std::string::npos) << second;
  EXPECT_NE(second.find("in the last 10 s"), std::string::npos) << second;
}

}  // namespace
}  // namespace ktesio::daemon::metering
