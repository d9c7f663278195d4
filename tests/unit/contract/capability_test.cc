// The declaration vocabulary: names, closed-enum parsing and capability projection.

#include <string>

#include "gtest/gtest.h"
#include "ktesio/contract/declaration.h"
#include "status_testing.h"

namespace ktesio::contract {
namespace {

using testing::IsOk;
using testing::ManifestInvalid;

TEST(OsTest, NamesRoundTrip) {
  for (Os os : kAllOses) {
    absl::StatusOr<Os> parsed = ParseOs(OsName(os));
    ASSERT_TRUE(IsOk(parsed));
    EXPECT_EQ(*parsed, os);
  }
  EXPECT_EQ(OsName(Os::kLinux), "linux");
  EXPECT_EQ(OsName(Os::kMacos), "macos");
  EXPECT_EQ(OsName(Os::kWindows), "windows");
}

TEST(OsTest, UnknownOsListsAllowedValues) {
  EXPECT_TRUE(ManifestInvalid(ParseOs("freebsd"), "invalid OS 'freebsd'"));
  EXPECT_TRUE(ManifestInvalid(ParseOs("Linux"), "linux, macos, windows"));
  EXPECT_TRUE(ManifestInvalid(ParseOs(""), "expected one of"));
}

TEST(OsTest, CurrentOsMatchesBuildPlatform) {
#if defined(_WIN32)
  EXPECT_EQ(CurrentOs(), Os::kWindows);
#elif defined(__APPLE__)
  EXPECT_EQ(CurrentOs(), Os::kMacos);
#else
  EXPECT_EQ(CurrentOs(), Os::kLinux);
#endif
}

TEST(SupportLevelTest, NamesRoundTrip) {
  EXPECT_EQ(SupportLevelName(SupportLevel::kGuaranteed), "guaranteed");
  EXPECT_EQ(SupportLevelName(SupportLevel::kBestEffort), "best-effort");
  EXPECT_EQ(SupportLevelName(SupportLevel::kUnsupported), "unsupported");
  for (SupportLevel level :
       {SupportLevel::kGuaranteed, SupportLevel::kBestEffort, SupportLevel::kUnsupported}) {
    absl::StatusOr<SupportLevel> parsed = ParseSupportLevel(SupportLevelName(level));
    ASSERT_TRUE(IsOk(parsed));
    EXPECT_EQ(*parsed, level);
  }
}

TEST(SupportLevelTest, RejectsNearMisses) {
  for (const char* bad : {"best_effort", "Guaranteed", "besteffort", "yes", ""}) {
    EXPECT_TRUE(ManifestInvalid(ParseSupportLevel(bad), "guaranteed, best-effort, unsupported"))
        << bad;
  }
}

TEST(CapabilityTest, Names) {
  EXPECT_EQ(CapabilityName(Capability::kPause), "pause");
  EXPECT_EQ(CapabilityName(Capability::kInteraction), "interaction");
}

TEST(MeteringSourceTest, ClosedEnum) {
  EXPECT_EQ(MeteringSourceName(MeteringSource::kSelfReported), "self-reported");
  EXPECT_EQ(MeteringSourceName(MeteringSource::kEngineObserved), "engine-observed");
  ASSERT_TRUE(IsOk(ParseMeteringSource("self-reported")));
  EXPECT_EQ(*ParseMeteringSource("engine-observed"), MeteringSource::kEngineObserved);
  EXPECT_EQ(*ParseMeteringSource("self-reported"), MeteringSource::kSelfReported);
  EXPECT_TRUE(ManifestInvalid(ParseMeteringSource("proxy"),
                              "invalid metering source 'proxy': expected one of self-reported, "
                              "engine-observed"));
}

TEST(InteractionChannelTest, ClosedEnum) {
  EXPECT_EQ(InteractionChannelName(InteractionChannel::kStdio), "stdio");
  EXPECT_EQ(InteractionChannelName(InteractionChannel::kHttp), "http");
  EXPECT_EQ(*ParseInteractionChannel("stdio"), InteractionChannel::kStdio);
  EXPECT_EQ(*ParseInteractionChannel("http"), InteractionChannel::kHttp);
  EXPECT_TRUE(ManifestInvalid(ParseInteractionChannel("grpc"), "expected one of stdio, http"));
  EXPECT_TRUE(ManifestInvalid(ParseInteractionChannel("HTTP"), "invalid interaction channel"));
}

TEST(CapabilityDeclarationTest, MissingEntryProjectsToUnsupported) {
  CapabilityDeclaration declaration;
  for (Capability capability : kAllCapabilities) {
    for (Os os : kAllOses) {
      EXPECT_EQ(declaration.Project(capability, os), SupportLevel::kUnsupported);
      EXPECT_FALSE(declaration.HasEntry(capability, os));
    }
  }
  EXPECT_FALSE(declaration.IsViable());
}

TEST(CapabilityDeclarationTest, ProjectsDeclaredLevelsPerOs) {
  CapabilityDeclaration declaration;
  declaration.Set(Capability::kPause, Os::kLinux, SupportLevel::kGuaranteed);
  declaration.Set(Capability::kPause, Os::kWindows, SupportLevel::kBestEffort);
  declaration.Set(Capability::kInteraction, Os::kMacos, SupportLevel::kUnsupported);
  EXPECT_EQ(declaration.Project(Capability::kPause, Os::kLinux), SupportLevel::kGuaranteed);
  EXPECT_EQ(declaration.Project(Capability::kPause, Os::kWindows), SupportLevel::kBestEffort);
  EXPECT_EQ(declaration.Project(Capability::kPause, Os::kMacos), SupportLevel::kUnsupported);
  EXPECT_FALSE(declaration.HasEntry(Capability::kPause, Os::kMacos));
  // An explicit unsupported entry is distinguishable from no entry (quoted honestly).
  EXPECT_TRUE(declaration.HasEntry(Capability::kInteraction, Os::kMacos));
  EXPECT_EQ(declaration.Project(Capability::kInteraction, Os::kMacos), SupportLevel::kUnsupported);
  EXPECT_TRUE(declaration.IsViable());
}

TEST(CapabilityDeclarationTest, SetOverwrites) {
  CapabilityDeclaration declaration;
  declaration.Set(Capability::kPause, Os::kLinux, SupportLevel::kGuaranteed);
  declaration.Set(Capability::kPause, Os::kLinux, SupportLevel::kUnsupported);
  EXPECT_EQ(declaration.Project(Capability::kPause, Os::kLinux), SupportLevel::kUnsupported);
  EXPECT_FALSE(declaration.IsViable());
}

TEST(CapabilityDeclarationTest, ViabilityNeedsOneNonUnsupportedEntryAnywhere) {
  CapabilityDeclaration all_unsupported;
  for (Capability capability : kAllCapabilities) {
    for (Os os : kAllOses) {
      all_unsupported.Set(capability, os, SupportLevel::kUnsupported);
    }
  }
  EXPECT_FALSE(all_unsupported.IsViable());
  CapabilityDeclaration one_best_effort = all_unsupported;
  one_best_effort.Set(Capability::kInteraction, Os::kWindows, SupportLevel::kBestEffort);
  EXPECT_TRUE(one_best_effort.IsViable());
  EXPECT_FALSE(one_best_effort == all_unsupported);
}

}  // namespace
}  // namespace ktesio::contract
