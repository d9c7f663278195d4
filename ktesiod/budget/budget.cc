#include "budget/budget.h"

#include <limits>

#include "absl/numeric/int128.h"

namespace ktesio::daemon::budget {
namespace {

constexpr int64_t kMaxMoney = std::numeric_limits<int64_t>::max();
constexpr uint64_t kMaxTokens = std::numeric_limits<uint64_t>::max();

}  // namespace

int64_t SaturatingAdd(int64_t a, int64_t b) {
  if (a < 0) {
    a = 0;
  }
  if (b < 0) {
    b = 0;
  }
  return a > kMaxMoney - b ? kMaxMoney : a + b;
}

uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return a > kMaxTokens - b ? kMaxTokens : a + b; }

int64_t PriceTokens(uint64_t tokens, int64_t micros_per_million) {
  if (tokens == 0 || micros_per_million <= 0) {
    return 0;
  }
  // tokens * rate / 1e6, half-up, exact in 128-bit.
  const absl::uint128 product =
      absl::uint128(tokens) * absl::uint128(static_cast<uint64_t>(micros_per_million));
  const absl::uint128 rounded = (product + 500000) / 1000000;
  return rounded > absl::uint128(static_cast<uint64_t>(kMaxMoney))
             ? kMaxMoney
             : static_cast<int64_t>(absl::Uint128Low64(rounded));
}

int64_t PriceEvent(uint64_t input_tokens, uint64_t output_tokens, const Rate& rate) {
  return SaturatingAdd(PriceTokens(input_tokens, rate.input_micros_per_million),
                       PriceTokens(output_tokens, rate.output_micros_per_million));
}

std::string ScopeName(Scope scope) { return scope == Scope::kRun ? "run" : "cumulative"; }

std::string DimensionName(Dimension dim) {
  return dim == Dimension::kTokens ? "tokens" : "dollars";
}

std::string ActionName(Action action) {
  switch (action) {
    case Action::kPause:
      return "pause";
    case Action::kStop:
      return "stop";
    case Action::kWarn:
      return "warn";
  }
  return "pause";
}

std::vector<Breach> Evaluate(const Limits& limits, const Totals& totals, const Fired& fired) {
  std::vector<Breach> breaches;
  auto check = [&](Scope scope, Dimension dim, std::optional<int64_t> limit,
                   std::optional<int64_t> observed) {
    if (!limit.has_value() || !observed.has_value() || fired.count({scope, dim}) != 0) {
      return;
    }
    if (*observed >= *limit) {
      breaches.push_back(Breach{scope, dim, *limit, *observed});
    }
  };
  auto as_signed = [](uint64_t v) {
    return static_cast<int64_t>(v > static_cast<uint64_t>(kMaxMoney) ? kMaxMoney : v);
  };
  auto token_limit = [&](const std::optional<uint64_t>& v) -> std::optional<int64_t> {
    return v.has_value() ? std::optional<int64_t>(as_signed(*v)) : std::nullopt;
  };
  const bool priced = limits.rate.has_value();
  check(Scope::kRun, Dimension::kTokens, token_limit(limits.tokens_per_run),
        as_signed(totals.run_tokens));
  check(Scope::kRun, Dimension::kDollars, priced ? limits.dollars_per_run : std::nullopt,
        totals.run_dollars);
  check(Scope::kCumulative, Dimension::kTokens, token_limit(limits.tokens_cumulative),
        as_signed(totals.cumulative_tokens));
  check(Scope::kCumulative, Dimension::kDollars, priced ? limits.dollars_cumulative : std::nullopt,
        totals.cumulative_dollars);
  return breaches;
}

}  // namespace ktesio::daemon::budget
