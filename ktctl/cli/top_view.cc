#include "cli/top_view.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/render.h"
#include "ktesio/contract/json_writer.h"

namespace ktesio::cli::top {
namespace {

constexpr std::array<std::string_view, 7> kSortNames = {"name",     "state",   "cpu",  "mem",
                                                        "restarts", "tok/min", "spend"};

bool IsLive(v1::AgentState state) {
  return state == v1::AGENT_STATE_STARTING || state == v1::AGENT_STATE_RUNNING ||
         state == v1::AGENT_STATE_PAUSED || state == v1::AGENT_STATE_STOPPING;
}

// Lower is more urgent: what needs the operator's eye sorts first.
int Urgency(v1::AgentState state) {
  switch (state) {
    case v1::AGENT_STATE_FAILED:
      return 0;
    case v1::AGENT_STATE_STARTING:
      return 1;
    case v1::AGENT_STATE_STOPPING:
      return 2;
    case v1::AGENT_STATE_PAUSED:
      return 3;
    case v1::AGENT_STATE_RUNNING:
      return 4;
    case v1::AGENT_STATE_STOPPED:
      return 5;
    default:
      return 6;
  }
}

uint64_t Tokens(const v1::AgentInstance& instance) {
  return instance.usage().cumulative_input_tokens() + instance.usage().cumulative_output_tokens();
}

std::optional<BudgetRemaining> Remaining(const v1::AgentInstance& instance) {
  if (!instance.has_budget()) {
    return std::nullopt;
  }
  const v1::BudgetView& b = instance.budget();
  BudgetRemaining out;
  auto take_min = [](auto& slot, auto value) {
    slot = slot.has_value() ? std::min(*slot, value) : value;
  };
  if (b.has_per_run_limit()) {
    take_min(out.tokens, b.per_run_remaining());
  }
  if (b.has_cumulative_limit()) {
    take_min(out.tokens, b.cumulative_remaining());
  }
  if (b.has_per_run_cost_cap()) {
    take_min(out.micro_dollars, b.per_run_dollars_remaining());
  }
  if (b.has_cumulative_cost_cap()) {
    take_min(out.micro_dollars, b.cumulative_dollars_remaining());
  }
  return out;
}

// The string value of `"key":"..."` in a flat JSON object; nullopt when absent.
std::optional<std::string> JsonStringField(std::string_view json, std::string_view key) {
  const std::string needle = "\"" + std::string(key) + "\":\"";
  size_t at = json.find(needle);
  if (at == std::string_view::npos) {
    return std::nullopt;
  }
  std::string value;
  for (size_t i = at + needle.size(); i < json.size(); ++i) {
    if (json[i] == '"') {
      return value;
    }
    if (json[i] == '\\' && i + 1 < json.size()) {
      ++i;
      value += json[i] == 'n' ? '\n' : json[i] == 't' ? '\t' : json[i];
      continue;
    }
    value += json[i];
  }
  return std::nullopt;
}

std::optional<v1::AgentState> ParseState(std::string_view name) {
  for (int s = v1::AGENT_STATE_REGISTERED; s <= v1::AGENT_STATE_FAILED; ++s) {
    if (StateName(static_cast<v1::AgentState>(s)) == name) {
      return static_cast<v1::AgentState>(s);
    }
  }
  return std::nullopt;
}

std::string Fixed1(double value) { return absl::StrFormat("%.1f", value); }

}  // namespace

std::string_view SortKeyName(SortKey key) { return kSortNames[static_cast<size_t>(key)]; }

std::optional<SortKey> ParseSortKey(std::string_view text) {
  for (size_t i = 0; i < kSortNames.size(); ++i) {
    if (kSortNames[i] == text) {
      return static_cast<SortKey>(i);
    }
  }
  if (text == "tokens") {
    return SortKey::kTokens;
  }
  return std::nullopt;
}

SortKey NextSortKey(SortKey key) {
  return static_cast<SortKey>((static_cast<size_t>(key) + 1) % kSortNames.size());
}

void RateTracker::Observe(const v1::ListAgentsResponse& response, int64_t steady_ms) {
  std::map<std::string, Baseline> next;
  for (const v1::AgentInstance& instance : response.instances()) {
    Baseline now;
    now.has_cpu = instance.has_resources();
    now.cpu_seconds = instance.resources().cpu_seconds();
    now.current_run = instance.current_run();
    now.tokens = Tokens(instance);
    now.at_ms = steady_ms;
    auto old = baselines_.find(instance.name());
    if (old == baselines_.end()) {
      next[instance.name()] = now;
      continue;
    }
    const Baseline& base = old->second;
    const int64_t window_ms = steady_ms - base.at_ms;
    if (window_ms < min_window_ms_ || window_ms <= 0) {
      next[instance.name()] = base;  // too soon: keep the baseline and the last rates
      continue;
    }
    Rates rates;
    rates.measured = true;
    if (now.has_cpu) {
      // CPU seconds restart from 0 with each run: a new run counts from its own start.
      const bool same_run = base.has_cpu && base.current_run == now.current_run &&
                            now.cpu_seconds >= base.cpu_seconds;
      const double used = same_run ? now.cpu_seconds - base.cpu_seconds : now.cpu_seconds;
      rates.cpu_percent = used * 100000.0 / static_cast<double>(window_ms);
    }
    if (now.tokens >= base.tokens) {
      rates.tokens_per_minute =
          static_cast<double>(now.tokens - base.tokens) * 60000.0 / static_cast<double>(window_ms);
    }
    rates_[instance.name()] = rates;
    next[instance.name()] = now;
  }
  for (auto it = rates_.begin(); it != rates_.end();) {
    it = next.count(it->first) != 0 ? std::next(it) : rates_.erase(it);
  }
  baselines_ = std::move(next);
}

Rates RateTracker::For(const std::string& name) const {
  auto it = rates_.find(name);
  return it == rates_.end() ? Rates{} : it->second;
}

std::vector<Row> BuildRows(const v1::ListAgentsResponse& response, const RateTracker& rates,
                           int64_t now_unix_ms) {
  std::vector<Row> rows;
  rows.reserve(static_cast<size_t>(response.instances_size()));
  for (const v1::AgentInstance& instance : response.instances()) {
    Row row;
    row.name = instance.name();
    row.state = instance.state();
    row.cause = instance.cause().empty() ? instance.failed_cause() : instance.cause();
    if (IsLive(instance.state()) && instance.has_started_at_unix_ms()) {
      row.uptime_seconds = std::max<int64_t>(0, now_unix_ms - instance.started_at_unix_ms()) / 1000;
    }
    row.restarts = instance.restart_count();
    row.has_resources = instance.has_resources();
    row.resident_memory_bytes = instance.resources().resident_memory_bytes();
    row.rates = rates.For(instance.name());
    if (instance.usage().has_cumulative_dollars()) {
      row.micro_dollars = instance.usage().cumulative_dollars();
    }
    row.budget = Remaining(instance);
    rows.push_back(std::move(row));
  }
  return rows;
}

void SortRows(std::vector<Row>& rows, SortKey key, bool reverse) {
  // Numbers sort largest first, so compare (b, a) for them.
  auto less = [key](const Row& a, const Row& b) {
    auto spend = [](const Row& r) { return r.micro_dollars.value_or(-1); };
    auto cpu = [](const Row& r) { return r.has_resources ? r.rates.cpu_percent : -1.0; };
    switch (key) {
      case SortKey::kState:
        return std::make_pair(Urgency(a.state), a.name) < std::make_pair(Urgency(b.state), b.name);
      case SortKey::kCpu:
        return std::make_pair(cpu(b), a.name) < std::make_pair(cpu(a), b.name);
      case SortKey::kMem:
        return std::make_pair(b.resident_memory_bytes, a.name) <
               std::make_pair(a.resident_memory_bytes, b.name);
      case SortKey::kRestarts:
        return std::make_pair(b.restarts, a.name) < std::make_pair(a.restarts, b.name);
      case SortKey::kTokens:
        return std::make_pair(b.rates.tokens_per_minute, a.name) <
               std::make_pair(a.rates.tokens_per_minute, b.name);
      case SortKey::kSpend:
        return std::make_pair(spend(b), a.name) < std::make_pair(spend(a), b.name);
      case SortKey::kName:
        break;
    }
    return a.name < b.name;
  };
  std::stable_sort(rows.begin(), rows.end(), less);
  if (reverse) {
    std::reverse(rows.begin(), rows.end());
  }
}

bool ApplyTransition(v1::ListAgentsResponse& response, const std::string& instance,
                     std::string_view payload_json) {
  std::optional<std::string> state_name = JsonStringField(payload_json, "new_state");
  std::optional<v1::AgentState> state =
      state_name.has_value() ? ParseState(*state_name) : std::nullopt;
  if (!state.has_value()) {
    return false;
  }
  for (v1::AgentInstance& entry : *response.mutable_instances()) {
    if (entry.name() == instance) {
      entry.set_state(*state);
      entry.set_cause(JsonStringField(payload_json, "cause").value_or(""));
      if (!IsLive(*state)) {
        entry.clear_resources();  // no process any more: nothing to sample
      }
      return true;
    }
  }
  return false;
}

std::string ShortCause(std::string_view cause) {
  std::string_view head = cause.substr(0, cause.find('{'));
  while (!head.empty() && head.back() == ' ') {
    head.remove_suffix(1);
  }
  return std::string(head);
}

std::string FormatBytes(uint64_t bytes) {
  constexpr std::array<char, 5> kUnits = {'B', 'K', 'M', 'G', 'T'};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < kUnits.size()) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0 || value >= 100) {
    return absl::StrFormat("%.0f%c", value, kUnits[unit]);
  }
  return absl::StrFormat("%.1f%c", value, kUnits[unit]);
}

std::string FormatCount(double value) {
  if (value < 999.5) {
    return absl::StrFormat("%.0f", value);
  }
  const char* suffix = "k";
  value /= 1000;
  if (value >= 999.5) {
    value /= 1000;
    suffix = "M";
  }
  return value < 9.95 ? absl::StrFormat("%.1f%s", value, suffix)
                      : absl::StrFormat("%.0f%s", value, suffix);
}

std::string FormatUptime(int64_t s) {
  if (s >= 86400) {
    return absl::StrFormat("%dd%02dh", s / 86400, s % 86400 / 3600);
  }
  if (s >= 3600) {
    return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
  }
  if (s >= 60) {
    return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  }
  return absl::StrCat(s, "s");
}

std::string FormatSpend(int64_t micro_dollars) {
  const int64_t cents = (micro_dollars + (micro_dollars < 0 ? -5000 : 5000)) / 10000;
  const int64_t magnitude = cents < 0 ? -cents : cents;
  return absl::StrFormat("%s$%d.%02d", cents < 0 ? "-" : "", magnitude / 100, magnitude % 100);
}

std::string DaemonTitle(const v1::GetStatusResponse& status, int64_t now_unix_ms, bool utf8) {
  const std::string dot = utf8 ? " · " : " | ";
  std::string title =
      absl::StrCat("ktesiod ", status.version().daemon_version(), " pid ", status.pid(), " up ",
                   FormatUptime((now_unix_ms - status.started_at_unix_ms()) / 1000), dot,
                   status.os(), dot, status.socket_path());
  if (status.problems_size() > 0) {
    absl::StrAppend(&title, dot, status.problems_size(),
                    status.problems_size() == 1 ? " problem" : " problems");
  }
  return title;
}

std::string FleetSummary(const std::vector<Row>& rows, const v1::FleetTotals& totals, bool utf8) {
  std::map<int, std::pair<std::string, int>> by_state;
  double cpu = 0;
  uint64_t mem = 0;
  for (const Row& row : rows) {
    auto& [name, count] = by_state[Urgency(row.state)];
    name = StateName(row.state);
    ++count;
    cpu += row.has_resources ? row.rates.cpu_percent : 0;
    mem += row.resident_memory_bytes;
  }
  std::vector<std::string> counts;
  for (const auto& [urgency, entry] : by_state) {
    counts.push_back(absl::StrCat(entry.second, " ", entry.first));
  }
  const std::string dot = utf8 ? " · " : " | ";
  std::string line =
      absl::StrCat(rows.size(), rows.size() == 1 ? " agent" : " agents", counts.empty() ? "" : ": ",
                   absl::StrJoin(counts, ", "), dot, "CPU ", Fixed1(cpu), "%", dot, "MEM ",
                   FormatBytes(mem), dot, "tokens ", FormatCount(totals.total_input_tokens()),
                   " in / ", FormatCount(totals.total_output_tokens()), " out");
  if (totals.has_total_dollars()) {
    absl::StrAppend(&line, dot, FormatSpend(totals.total_dollars()),
                    totals.dollars_partial() ? " (partial)" : "");
  }
  return line;
}

std::string SnapshotJson(const std::vector<Row>& rows) {
  contract::JsonWriter json;
  json.BeginObject().Key("schema_version").Int(1).Key("instances").BeginArray();
  for (const Row& row : rows) {
    json.BeginObject().Key("name").String(row.name).Key("state").String(StateName(row.state));
    json.Key("cause").String(row.cause).Key("uptime_seconds").Int(row.uptime_seconds.value_or(0));
    json.Key("restarts").Uint(row.restarts);
    json.Key("cpu_percent").Raw(Fixed1(row.has_resources ? row.rates.cpu_percent : 0));
    json.Key("resident_memory_bytes").Uint(row.resident_memory_bytes);
    json.Key("tokens_per_minute").Raw(Fixed1(row.rates.tokens_per_minute));
    json.Key("dollars");
    row.micro_dollars.has_value() ? json.Int(*row.micro_dollars) : json.Null();
    json.Key("budget_remaining");
    if (!row.budget.has_value()) {
      json.Null();
    } else {
      json.BeginObject();
      if (row.budget->tokens.has_value()) {
        json.Key("tokens").Uint(*row.budget->tokens);
      }
      if (row.budget->micro_dollars.has_value()) {
        json.Key("dollars").Int(*row.budget->micro_dollars);
      }
      json.EndObject();
    }
    json.EndObject();
  }
  json.EndArray().EndObject();
  return json.Take();
}

}  // namespace ktesio::cli::top
