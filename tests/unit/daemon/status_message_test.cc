// The cut of long status messages (api/call.h): what a gRPC client with the default 8 KiB
// metadata limit can still receive, cut at lines, never inside a UTF-8 sequence.

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/call.h"
#include "gtest/gtest.h"
#include "ktesio/v1/common.pb.h"

namespace ktesio::daemon::api {
namespace {

// What the two trailers carrying the message would hold, in bytes on the wire.
size_t WireBytes(const grpc::Status& status) {
  size_t percent = 0;
  for (const char c : status.error_message()) {
    const auto byte = static_cast<unsigned char>(c);
    percent += byte < 0x20 || byte > 0x7e || byte == '%' ? 3 : 1;
  }
  return percent + (status.error_details().size() + 2) / 3 * 4;
}

std::string Lines(int n, const std::string& line) {
  std::string text = absl::StrCat(n, " problems");
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&text, "\nfleet.toml:", i + 1, ": ", line);
  }
  return text;
}

TEST(StatusMessage, AShortMessageIsUnchanged) {
  const std::string message = Lines(5, "agents.a: missing mandatory section [capabilities]");
  EXPECT_EQ(FitStatusMessage(message), message);
  const grpc::Status status = ToGrpcStatus(absl::InvalidArgumentError(message));
  EXPECT_EQ(status.error_message(), message);
  v1::ErrorDetail detail;
  ASSERT_TRUE(detail.ParseFromString(status.error_details()));
  EXPECT_EQ(detail.message(), message);
}

TEST(StatusMessage, ALongListKeepsWholeLinesAndCountsTheRest) {
  const std::string message = Lines(300, "agents.a: missing mandatory section [capabilities]");
  const std::string cut = FitStatusMessage(message);
  ASSERT_LT(cut.size(), message.size());
  EXPECT_TRUE(message.starts_with(cut.substr(0, cut.rfind('\n')))) << "kept lines were changed";
  const std::vector<std::string> lines = absl::StrSplit(cut, '\n');
  ASSERT_GT(lines.size(), 10u) << cut;
  const size_t kept = lines.size() - 1;  // the summary and whole problem lines
  EXPECT_EQ(lines.back(), absl::StrCat("... ", 301 - kept, " more lines not shown (",
                                       std::string(kStatusCutNote), ")"));
  const grpc::Status status = ToGrpcStatus(absl::InvalidArgumentError(message));
  EXPECT_EQ(status.error_message(), cut);
  EXPECT_LE(WireBytes(status), kStatusMessageBudget + 64);
}

TEST(StatusMessage, OneHugeLineIsCutOutsideUtf8Sequences) {
  std::string line = "name ";
  for (int i = 0; i < 20000; ++i) {
    line += "\xc3\xa9";  // U+00E9, two bytes, each percent-encoded to three
  }
  const std::string cut = FitStatusMessage(line);
  ASSERT_TRUE(cut.ends_with(absl::StrCat(" ... (", std::string(kStatusCutNote), ")")))
      << cut.substr(0, 80);
  const std::string kept = cut.substr(0, cut.size() - kStatusCutNote.size() - 7);
  ASSERT_GT(kept.size(), 5u);
  EXPECT_TRUE(line.starts_with(kept));
  EXPECT_EQ((kept.size() - 5) % 2, 0u) << "a UTF-8 sequence was split";
  const grpc::Status status = ToGrpcStatus(absl::InvalidArgumentError(line));
  EXPECT_LE(WireBytes(status), kStatusMessageBudget + 64);
}

TEST(StatusMessage, AFirstLineTooLongIsCutAndTheOthersCounted) {
  const std::string first(20000, 'x');
  const std::string cut = FitStatusMessage(first + "\nsecond\nthird");
  EXPECT_TRUE(cut.starts_with("xxxx")) << cut.substr(0, 40);
  EXPECT_NE(cut.find(" ...\n... 2 more lines not shown"), std::string::npos)
      << cut.substr(cut.size() - 120);
  EXPECT_LE(cut.size(), kStatusMessageBudget);
}

TEST(StatusMessage, PercentSignsCountThreeTimes) {
  const std::string message(kStatusMessageBudget / 3, '%');
  const std::string cut = FitStatusMessage(message);
  EXPECT_LT(cut.size(), message.size());
  EXPECT_TRUE(cut.ends_with(absl::StrCat("(", std::string(kStatusCutNote), ")")));
}

}  // namespace
}  // namespace ktesio::daemon::api
