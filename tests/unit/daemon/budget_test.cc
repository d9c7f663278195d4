#include "budget/budget.h"

#include <limits>

#include "gtest/gtest.h"

namespace ktesio::daemon::budget {
namespace {

TEST(Money, PricingRoundsHalfUpPerDirection) {
  // $2.50 per 1M tokens = 2,500,000 micros per 1M = 2.5 micros per token.
  EXPECT_EQ(PriceTokens(1, 2500000), 3);  // 2.5 -> 3 (half-up)
  EXPECT_EQ(PriceTokens(2, 2500000), 5);
  EXPECT_EQ(PriceTokens(3, 1), 0);       // 0.000003 -> 0
  EXPECT_EQ(PriceTokens(500000, 1), 1);  // 0.5 -> 1
  EXPECT_EQ(PriceTokens(499999, 1), 0);
  EXPECT_EQ(PriceTokens(1000000, 15000000), 15000000);
  // Each direction rounds on its own: 0.5 + 0.5 = 2, not round(1.0) = 1.
  EXPECT_EQ(PriceEvent(500000, 500000, Rate{1, 1}), 2);
  EXPECT_EQ(PriceEvent(0, 0, Rate{5, 5}), 0);
}

TEST(Money, Saturates) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(SaturatingAdd(max, int64_t{1}), max);
  EXPECT_EQ(SaturatingAdd(int64_t{-5}, int64_t{3}), 3);
  EXPECT_EQ(SaturatingAdd(std::numeric_limits<uint64_t>::max(), uint64_t{2}),
            std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(PriceTokens(std::numeric_limits<uint64_t>::max(), max), max);
}

TEST(Budget, BreachAtLimitNotBefore) {
  Limits limits;
  limits.tokens_per_run = 100;
  EXPECT_TRUE(Evaluate(limits, {99, 99, {}, {}}, {}).empty());
  std::vector<Breach> at = Evaluate(limits, {100, 100, {}, {}}, {});
  ASSERT_EQ(at.size(), 1u);
  EXPECT_EQ(at[0], (Breach{Scope::kRun, Dimension::kTokens, 100, 100}));
}

TEST(Budget, OrderAndAtMostOncePerRun) {
  Limits limits;
  limits.tokens_per_run = 10;
  limits.tokens_cumulative = 10;
  limits.dollars_per_run = 5;
  limits.dollars_cumulative = 5;
  limits.rate = Rate{1000000, 1000000};
  Totals totals{20, 20, 20, 20};
  std::vector<Breach> all = Evaluate(limits, totals, {});
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].scope, Scope::kRun);
  EXPECT_EQ(all[0].dimension, Dimension::kTokens);
  EXPECT_EQ(all[1].scope, Scope::kRun);
  EXPECT_EQ(all[1].dimension, Dimension::kDollars);
  EXPECT_EQ(all[2].scope, Scope::kCumulative);
  EXPECT_EQ(all[2].dimension, Dimension::kTokens);
  EXPECT_EQ(all[3].dimension, Dimension::kDollars);
  Fired fired = {{Scope::kRun, Dimension::kTokens}, {Scope::kCumulative, Dimension::kDollars}};
  std::vector<Breach> rest = Evaluate(limits, totals, fired);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].dimension, Dimension::kDollars);
  EXPECT_EQ(rest[0].scope, Scope::kRun);
  EXPECT_EQ(rest[1].dimension, Dimension::kTokens);
}

TEST(Budget, DollarCapsAreInertWithoutARate) {
  Limits limits;
  limits.dollars_per_run = 1;
  EXPECT_TRUE(Evaluate(limits, {1000, 1000, 5000, 5000}, {}).empty());
  limits.rate = Rate{1, 1};
  EXPECT_EQ(Evaluate(limits, {1000, 1000, 5000, 5000}, {}).size(), 1u);
}

TEST(Budget, Names) {
  EXPECT_EQ(ScopeName(Scope::kRun), "run");
  EXPECT_EQ(ScopeName(Scope::kCumulative), "cumulative");
  EXPECT_EQ(DimensionName(Dimension::kDollars), "dollars");
  EXPECT_EQ(ActionName(Action::kWarn), "warn");
}

}  // namespace
}  // namespace ktesio::daemon::budget
