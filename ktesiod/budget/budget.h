#pragma once

// Budgets and cost as pure functions (product.md §8): pricing a usage event at the Rate in
// force, and deciding which budget dimensions a new event crosses. Money is integer
// micro-dollars everywhere; arithmetic saturates instead of overflowing; nothing here touches a
// float.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ktesio::daemon::budget {

// Dollars per 1M tokens, in micro-dollars, per direction.
struct Rate {
  int64_t input_micros_per_million = 0;
  int64_t output_micros_per_million = 0;
};

// Saturating helpers (clamped to [0, INT64_MAX] for money, [0, UINT64_MAX] for tokens).
int64_t SaturatingAdd(int64_t a, int64_t b);
uint64_t SaturatingAdd(uint64_t a, uint64_t b);

// The price of `tokens` at `micros_per_million`, rounded half-up to a whole micro-dollar.
int64_t PriceTokens(uint64_t tokens, int64_t micros_per_million);

// The price of one event: each direction rounded half-up on its own, then summed.
int64_t PriceEvent(uint64_t input_tokens, uint64_t output_tokens, const Rate& rate);

enum class Scope { kRun, kCumulative };
enum class Dimension { kTokens, kDollars };
enum class Action { kPause, kStop, kWarn };

std::string ScopeName(Scope scope);        // "run" | "cumulative"
std::string DimensionName(Dimension dim);  // "tokens" | "dollars"
std::string ActionName(Action action);     // "pause" | "stop" | "warn"

struct Limits {
  std::optional<uint64_t> tokens_per_run;
  std::optional<uint64_t> tokens_cumulative;
  std::optional<int64_t> dollars_per_run;     // micro-dollars
  std::optional<int64_t> dollars_cumulative;  // micro-dollars
  std::optional<Rate> rate;                   // a full Rate (both directions) or none
  Action action = Action::kPause;
};

// Totals after the new event was added. Dollars are absent without a Rate.
struct Totals {
  uint64_t run_tokens = 0;
  uint64_t cumulative_tokens = 0;
  std::optional<int64_t> run_dollars;
  std::optional<int64_t> cumulative_dollars;
};

struct Breach {
  Scope scope = Scope::kRun;
  Dimension dimension = Dimension::kTokens;
  int64_t limit = 0;
  int64_t observed = 0;
  bool operator==(const Breach&) const = default;
};

using Fired = std::set<std::pair<Scope, Dimension>>;

// The breaches `totals` cause that have not fired in this Run yet, in the normative order:
// per-run before cumulative, tokens before dollars. A breach is total >= limit. Dollar caps
// are inert without a Rate.
std::vector<Breach> Evaluate(const Limits& limits, const Totals& totals, const Fired& fired);

}  // namespace ktesio::daemon::budget
