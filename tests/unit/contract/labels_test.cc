// Label keys, values and selectors in Kubernetes' syntax.

#include "ktesio/contract/labels.h"

#include "gtest/gtest.h"
#include "status_testing.h"

namespace ktesio::contract {
namespace {

using testing::IsOk;
using testing::StatusIs;

TEST(LabelKey, AcceptsNamesAndPrefixedNames) {
  for (const char* key : {"team", "a", "tier.v2", "app_name", "example.com/tier", "a-b.c/x_1"}) {
    EXPECT_TRUE(IsOk(ValidateLabelKey(key))) << key;
  }
}

TEST(LabelKey, RefusesWhatKubernetesRefuses) {
  const std::vector<std::string> keys = {
      "",   "-team",       "team-",  "Bad Key", "a/",
      "/a", "UPPER.com/x", "a..b/x", "é",       std::string(64, 'a')};
  for (const std::string& key : keys) {
    EXPECT_TRUE(StatusIs(ValidateLabelKey(key), absl::StatusCode::kInvalidArgument,
                         reason::kInvalidLabel, "invalid label key"))
        << key;
  }
}

TEST(LabelValue, EmptyOrANameOfAtMost63) {
  EXPECT_TRUE(IsOk(ValidateLabelValue("k", "")));
  EXPECT_TRUE(IsOk(ValidateLabelValue("k", "v1.2_x-y")));
  EXPECT_TRUE(IsOk(ValidateLabelValue("k", std::string(63, 'v'))));
  EXPECT_FALSE(ValidateLabelValue("k", std::string(64, 'v')).ok());
  EXPECT_FALSE(ValidateLabelValue("k", "-v").ok());
  EXPECT_FALSE(ValidateLabelValue("k", "a b").ok());
  EXPECT_TRUE(StatusIs(ValidateLabelValue("k", "a\nb"), absl::StatusCode::kInvalidArgument,
                       reason::kInvalidLabel, "a\\x0ab"));
}

TEST(Selector, EveryOperator) {
  const Labels labels = {{"team", "a"}, {"tier", "batch"}};
  auto matches = [&](const char* text) {
    absl::StatusOr<Selector> selector = Selector::Parse(text);
    EXPECT_TRUE(IsOk(selector)) << text;
    return selector.ok() && selector->Matches(labels);
  };
  EXPECT_TRUE(matches(""));
  EXPECT_TRUE(matches("team=a"));
  EXPECT_TRUE(matches("team==a"));
  EXPECT_TRUE(matches("team = a , tier=batch"));
  EXPECT_FALSE(matches("team=b"));
  EXPECT_TRUE(matches("team!=b"));
  EXPECT_TRUE(matches("missing!=b")) << "!= matches an absent key, as in Kubernetes";
  EXPECT_TRUE(matches("tier"));
  EXPECT_FALSE(matches("!tier"));
  EXPECT_TRUE(matches("!missing"));
  EXPECT_TRUE(matches("tier in (online, batch)"));
  EXPECT_FALSE(matches("tier notin (batch)"));
  EXPECT_TRUE(matches("missing notin (x)"));
  EXPECT_FALSE(matches("team=a,tier=online"));
}

TEST(Selector, MalformedSelectorsNameTheProblem) {
  for (const char* text : {"team in (a", "team=a,,x=b", "team in a,b)", "Bad Key=1", "k=-v",
                           "k inn (a)", ",", "team in ()", "team notin ( )"}) {
    EXPECT_TRUE(StatusIs(Selector::Parse(text).status(), absl::StatusCode::kInvalidArgument,
                         reason::kInvalidSelector, "invalid selector"))
        << text;
  }
}

TEST(LabelEdits, SetsAndRemovals) {
  absl::StatusOr<LabelEdit> edit = ParseLabelEdits({"team=a", "tier-", "empty="});
  ASSERT_TRUE(IsOk(edit));
  EXPECT_EQ(edit->set, (Labels{{"team", "a"}, {"empty", ""}}));
  EXPECT_EQ(edit->remove, std::vector<std::string>{"tier"});
  EXPECT_FALSE(ParseLabelEdits({"novalue"}).ok());
  EXPECT_FALSE(ParseLabelEdits({"k=v", "k-"}).ok());
  EXPECT_FALSE(ParseLabelEdits({"-=x"}).ok());
}

}  // namespace
}  // namespace ktesio::contract
