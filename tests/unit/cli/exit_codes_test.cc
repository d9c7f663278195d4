#include "cli/exit_codes.h"

#include "gtest/gtest.h"

namespace ktesio::cli {
namespace {

TEST(ExitCodes, EveryDocumentedReasonMapsToItsCode) {
  struct Case {
    const char* reason;
    int code;
  };
  const Case cases[] = {
      {"MANIFEST_INVALID", 1},
      {"CONTRACT_INCOMPATIBLE", 1},
      {"LAUNCH_FAILED", 1},
      {"IO_ERROR", 1},
      {"STORE_ERROR", 1},
      {"UNIMPLEMENTED", 1},
      {"USAGE", 2},
      {"INVALID_NAME", 2},
      {"UNKNOWN_KIND", 2},
      {"UNKNOWN_CONFIG_KEY", 2},
      {"DUPLICATE_NAME", 2},
      {"UNKNOWN_MEMORY_KIND", 2},
      {"NOT_FOUND", 3},
      {"MANIFEST_NOT_FOUND", 3},
      {"INVALID_TRANSITION", 4},
      {"INVALID_STATE", 4},
      {"STOP_NOT_CONFIRMED", 4},
      {"CAPABILITY_UNSUPPORTED", 5},
      {"TIMED_OUT", 6},
      {"DAEMON_UNREACHABLE", 7},
      {"API_MISMATCH", 7},
      {"SHUTTING_DOWN", 7},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ExitCodeFor(c.reason, grpc::StatusCode::UNKNOWN), c.code) << c.reason;
  }
}

TEST(ExitCodes, UnknownReasonsFallBackToTheGrpcCode) {
  EXPECT_EQ(ExitCodeFor("", grpc::StatusCode::OK), 0);
  EXPECT_EQ(ExitCodeFor("", grpc::StatusCode::UNAVAILABLE), 7);
  EXPECT_EQ(ExitCodeFor("", grpc::StatusCode::DEADLINE_EXCEEDED), 6);
  EXPECT_EQ(ExitCodeFor("", grpc::StatusCode::NOT_FOUND), 3);
  EXPECT_EQ(ExitCodeFor("", grpc::StatusCode::INVALID_ARGUMENT), 2);
  EXPECT_EQ(ExitCodeFor("SOMETHING_NEW", grpc::StatusCode::INTERNAL), 1);
  EXPECT_EQ(ExitCodeFor("", grpc::StatusCode::PERMISSION_DENIED), 1);
}

}  // namespace
}  // namespace ktesio::cli
