// Strict semver parsing and contract-version negotiation.

#include <string>

#include "gtest/gtest.h"
#include "ktesio/contract/declaration.h"
#include "ktesio/contract/semver.h"
#include "status_testing.h"

namespace ktesio::contract {
namespace {

using testing::IsOk;
using testing::ManifestInvalid;
using testing::Message;
using testing::StatusIs;

struct ValidCase {
  const char* text;
  SemVer expected;
};

TEST(ParseSemVerTest, AcceptsStrictSemver) {
  const ValidCase cases[] = {
      {"1.0.0", {1, 0, 0, "", ""}},
      {"0.0.0", {0, 0, 0, "", ""}},
      {"10.20.30", {10, 20, 30, "", ""}},
      {"1.0.0-rc.1", {1, 0, 0, "rc.1", ""}},
      {"1.0.0-rc.1+build.5", {1, 0, 0, "rc.1", "build.5"}},
      {"1.0.0+build.5", {1, 0, 0, "", "build.5"}},
      {"1.0.0-alpha-beta", {1, 0, 0, "alpha-beta", ""}},
      {"1.0.0-0", {1, 0, 0, "0", ""}},
      {"1.0.0-0a", {1, 0, 0, "0a", ""}},
      {"1.0.0+001", {1, 0, 0, "", "001"}},  // build identifiers may have leading zeros
      {"1.0.0---", {1, 0, 0, "--", ""}},
      {"18446744073709551615.0.0", {18446744073709551615ULL, 0, 0, "", ""}},
  };
  for (const ValidCase& c : cases) {
    absl::StatusOr<SemVer> parsed = ParseSemVer(c.text);
    ASSERT_TRUE(IsOk(parsed)) << c.text;
    EXPECT_EQ(*parsed, c.expected) << c.text;
  }
}

TEST(ParseSemVerTest, RejectsEverythingElse) {
  const char* cases[] = {
      "",         "v1.0.0",     "V1.0.0",    "1",
      "1.0",      "1.0.0.0",    "01.0.0",    "1.00.0",
      "1.0.00",   "1.0.0-",     "1.0.0+",    "1.0.0-rc..1",
      "1.0.0-01", "1.0.0-rc_1", "1.0.0+b+c", " 1.0.0",
      "1.0.0 ",   "1.0.0\n",    "1..0",      "a.b.c",
      "-1.0.0",   "+1.0.0",     "1.0.-0",    "1.0.0-r\xc3\xa9",
      "1.0.x",    ".1.0",       "1.0.",      "18446744073709551616.0.0",
      "1.0.0+.b",
  };
  for (const char* text : cases) {
    absl::StatusOr<SemVer> parsed = ParseSemVer(text);
    EXPECT_TRUE(ManifestInvalid(parsed, "expected strict semver X.Y.Z")) << "'" << text << "'";
  }
}

TEST(ParseSemVerTest, ErrorNamesTheValue) {
  EXPECT_TRUE(ManifestInvalid(ParseSemVer("v1.0.0"), "invalid version 'v1.0.0'"));
  EXPECT_TRUE(ManifestInvalid(ParseSemVer("v1.0.0"), "no 'v' prefix"));
  EXPECT_TRUE(ManifestInvalid(ParseSemVer("1.0"), "three numeric parts"));
  EXPECT_TRUE(ManifestInvalid(ParseSemVer("1.0.0-01"), "prerelease"));
  EXPECT_TRUE(ManifestInvalid(ParseSemVer("1.0.0+"), "build metadata"));
  EXPECT_TRUE(ManifestInvalid(ParseSemVer("1.02.0"), "leading zeros"));
}

TEST(NegotiateTest, SameMajorIsCompatible) {
  for (const char* version :
       {"1.0.0", "1.0.1", "1.9.0", "1.0.0-rc.1", "1.0.0-rc.1+build.5", "1.99.99+meta"}) {
    EXPECT_TRUE(IsOk(NegotiateContractVersion(version))) << version;
  }
}

TEST(NegotiateTest, ForeignMajorHasTheExactSeedMessage) {
  absl::Status status = NegotiateContractVersion("2.1.0");
  EXPECT_TRUE(
      StatusIs(status, absl::StatusCode::kFailedPrecondition, reason::kContractIncompatible));
  EXPECT_EQ(
      Message(status),
      "incompatible adapter contract: manifest declares 2.1.0, engine speaks 1.0.0 \xE2\x80\x94 "
      "compatible iff the major versions match (contract v1 policy, "
      "docs/adapter-contract.md#versioning)");
}

TEST(NegotiateTest, PreV1IsNotGrandfathered) {
  for (const char* version : {"0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.9.9-rc.1"}) {
    absl::Status status = NegotiateContractVersion(version);
    EXPECT_TRUE(StatusIs(status, absl::StatusCode::kFailedPrecondition,
                         reason::kContractIncompatible,
                         std::string("manifest declares ") + version + ", engine speaks 1.0.0"))
        << version;
  }
}

TEST(NegotiateTest, MessageQuotesTheVersionAsWritten) {
  absl::Status status = NegotiateContractVersion("3.0.0-beta.2+sha.abc");
  EXPECT_TRUE(StatusIs(status, absl::StatusCode::kFailedPrecondition, reason::kContractIncompatible,
                       "manifest declares 3.0.0-beta.2+sha.abc, engine speaks 1.0.0"));
}

TEST(NegotiateTest, InvalidVersionIsManifestInvalid) {
  for (const char* version : {"1", "1.0", "v1.0.0", "latest", ""}) {
    absl::Status status = NegotiateContractVersion(version);
    EXPECT_TRUE(ManifestInvalid(status, "expected strict semver X.Y.Z")) << version;
    EXPECT_TRUE(ManifestInvalid(status, std::string("'") + version + "'")) << version;
  }
}

TEST(NegotiateTest, EngineSpeaksContractV1) {
  EXPECT_EQ(kContractVersion, "1.0.0");
  EXPECT_EQ(kContractMajor, 1u);
  absl::StatusOr<SemVer> own = ParseSemVer(kContractVersion);
  ASSERT_TRUE(IsOk(own));
  EXPECT_EQ(own->major, kContractMajor);
}

}  // namespace
}  // namespace ktesio::contract
