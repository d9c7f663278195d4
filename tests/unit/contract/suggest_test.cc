// The one edit distance behind every "did you mean": unknown config keys and ktctl commands.

#include "ktesio/contract/suggest.h"

#include "gtest/gtest.h"

namespace ktesio::contract {
namespace {

TEST(EditDistance, CountsInsertionsDeletionsSubstitutionsAndTranspositions) {
  EXPECT_EQ(EditDistance("model", "model"), 0u);
  EXPECT_EQ(EditDistance("modle", "model"), 1u);  // adjacent transposition
  EXPECT_EQ(EditDistance("strat", "start"), 1u);
  EXPECT_EQ(EditDistance("stat", "start"), 1u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

TEST(Nearest, WithinTheThresholdOrNothing) {
  const std::vector<std::string> commands = {"agent start", "agent stop", "agent list",
                                             "daemon status"};
  EXPECT_EQ(Nearest("agent strat", commands), "agent start");
  EXPECT_EQ(Nearest("agnet list", commands), "agent list");
  EXPECT_EQ(Nearest("frobnicate", commands), "");
  EXPECT_EQ(SuggestionThreshold(6), 1u);
  EXPECT_EQ(SuggestionThreshold(12), 2u);
  EXPECT_EQ(SuggestionThreshold(13), 3u);
}

}  // namespace
}  // namespace ktesio::contract
