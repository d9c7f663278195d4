#include "cli/render.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/output.h"
#include "ktesio/contract/utf8.h"

namespace ktesio::cli {
namespace {

std::string BudgetSummary(const v1::AgentInstance& instance) {
  if (!instance.has_budget()) {
    return "—";
  }
  const v1::BudgetView& b = instance.budget();
  std::vector<std::string> parts;
  if (b.has_per_run_limit()) {
    parts.push_back(absl::StrCat("run ", b.per_run_remaining(), "/", b.per_run_limit()));
  }
  if (b.has_cumulative_limit()) {
    parts.push_back(absl::StrCat("total ", b.cumulative_remaining(), "/", b.cumulative_limit()));
  }
  // Remaining/ceiling, as for tokens: "run $0.40/$5.00 (estimated)".
  if (b.has_per_run_cost_cap()) {
    parts.push_back(absl::StrCat("run ", FormatCents(b.per_run_dollars_remaining()), "/",
                                 FormatDollars(b.per_run_cost_cap())));
  }
  if (b.has_cumulative_cost_cap()) {
    parts.push_back(absl::StrCat("total ", FormatCents(b.cumulative_dollars_remaining()), "/",
                                 FormatDollars(b.cumulative_cost_cap())));
  }
  parts.push_back(BreachActionName(b.breach_action()));
  return absl::StrJoin(parts, ", ");
}

std::string UsageSummary(const v1::UsageView& usage) {
  std::string text = absl::StrCat(usage.cumulative_input_tokens(), " in / ",
                                  usage.cumulative_output_tokens(), " out");
  if (usage.has_cumulative_dollars()) {
    absl::StrAppend(&text, " ", FormatDollars(usage.cumulative_dollars()));
  }
  return text;
}

std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) {
      // Count code points, not bytes, so "—" aligns.
      size_t width = 0;
      for (unsigned char c : row[i]) {
        width += (c & 0xc0) != 0x80 ? 1 : 0;
      }
      widths[i] = std::max(widths[i], width);
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) {
        size_t width = 0;
        for (unsigned char c : row[i]) {
          width += (c & 0xc0) != 0x80 ? 1 : 0;
        }
        line.append(widths[i] - width + 2, ' ');
      }
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::string StateName(v1::AgentState state) {
  switch (state) {
    case v1::AGENT_STATE_REGISTERED:
      return "registered";
    case v1::AGENT_STATE_STARTING:
      return "starting";
    case v1::AGENT_STATE_RUNNING:
      return "running";
    case v1::AGENT_STATE_PAUSED:
      return "paused";
    case v1::AGENT_STATE_STOPPING:
      return "stopping";
    case v1::AGENT_STATE_STOPPED:
      return "stopped";
    case v1::AGENT_STATE_FAILED:
      return "failed";
    default:
      return "unknown";
  }
}

std::string LevelName(v1::SupportLevel level) {
  switch (level) {
    case v1::SUPPORT_LEVEL_GUARANTEED:
      return "guaranteed";
    case v1::SUPPORT_LEVEL_BEST_EFFORT:
      return "best-effort";
    default:
      return "unsupported";
  }
}

std::string RestartPolicyName(v1::RestartPolicy policy) {
  switch (policy) {
    case v1::RESTART_POLICY_NEVER:
      return "never";
    case v1::RESTART_POLICY_ALWAYS:
      return "always";
    default:
      return "on-failure";
  }
}

std::string BreachActionName(v1::BreachAction action) {
  switch (action) {
    case v1::BREACH_ACTION_STOP:
      return "stop";
    case v1::BREACH_ACTION_WARN:
      return "warn";
    default:
      return "pause";
  }
}

std::string MeteringSourceName(v1::MeteringSource source) {
  return source == v1::METERING_SOURCE_ENGINE_OBSERVED ? "engine-observed" : "self-reported";
}

std::string TerminalText(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x80) {
      // UTF-8 text stays; a C1 control (U+0080..U+009F: CSI is U+009B) and a byte that is not
      // UTF-8 (a raw 0x9B is CSI to an 8-bit terminal) become escapes.
      const size_t length = contract::Utf8SequenceLength(text, i);
      const bool c1 = length == 2 && byte == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0;
      if (length == 0 || c1) {
        absl::StrAppendFormat(&out, "\\x%02x", byte);
        if (c1) {
          absl::StrAppendFormat(&out, "\\x%02x", static_cast<unsigned char>(text[++i]));
        }
      } else {
        out.append(text.substr(i, length));
        i += length - 1;
      }
    } else if (byte >= 0x20 && byte != 0x7f) {
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      absl::StrAppendFormat(&out, "\\x%02x", byte);
    }
  }
  return out;
}

std::string FormatCents(int64_t micros) {
  // Round half-up to cents for display only; the JSON carries exact micro-dollars.
  const bool negative = micros < 0;
  const uint64_t magnitude =
      negative ? static_cast<uint64_t>(-(micros + 1)) + 1 : static_cast<uint64_t>(micros);
  const uint64_t cents = (magnitude + 5000) / 10000;
  return absl::StrFormat("%s$%d.%02d", negative ? "-" : "", cents / 100, cents % 100);
}

std::string FormatDollars(int64_t micros) { return FormatCents(micros) + " (estimated)"; }

std::string ListTable(const v1::ListAgentsResponse& response, const ListOptions& options) {
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "KIND", "STATE", "RESTARTS", "BUDGET", "USAGE", "HOME"}};
  for (const std::string& key : options.label_columns) {
    rows[0].push_back(absl::AsciiStrToUpper(key));
  }
  if (options.show_labels) {
    rows[0].push_back("LABELS");
  }
  for (const v1::AgentInstance& i : response.instances()) {
    rows.push_back({i.name(), i.kind(), StateName(i.state()), absl::StrCat(i.restart_count()),
                    BudgetSummary(i), UsageSummary(i.usage()), i.agent_home()});
    for (const std::string& key : options.label_columns) {
      const auto found = i.labels().find(key);
      rows.back().push_back(found == i.labels().end() ? "" : found->second);
    }
    if (options.show_labels) {
      rows.back().push_back(LabelsText(i));
    }
  }
  std::string out = Table(rows);
  const v1::FleetTotals& t = response.totals();
  absl::StrAppend(&out, "Fleet: ", response.instances_size(), " instance",
                  response.instances_size() == 1 ? "" : "s", ", ", t.total_input_tokens(),
                  " input / ", t.total_output_tokens(), " output tokens");
  if (t.has_total_dollars()) {
    absl::StrAppend(
        &out, ", ", FormatDollars(t.total_dollars()),
        t.dollars_partial() ? absl::StrCat(" (", t.unpriced_count(), " unpriced)") : "");
  }
  out += "\n";
  return out;
}

std::string CapabilityTable(const v1::AgentInstance& instance) {
  const v1::CapabilityDeclaration& caps = instance.capabilities();
  const std::string os = instance.projected().os();
  auto row = [&](const char* name, const v1::CapabilityLevels& levels, v1::SupportLevel here) {
    return std::vector<std::string>{name, LevelName(levels.on_linux()),
                                    LevelName(levels.on_macos()), LevelName(levels.on_windows()),
                                    LevelName(here)};
  };
  return Table({{"CAPABILITY", "LINUX", "MACOS", "WINDOWS", absl::StrCat("HERE (", os, ")")},
                row("pause", caps.pause(), instance.projected().pause()),
                row("interaction", caps.interaction(), instance.projected().interaction())});
}

namespace {

// "3d 4h", "2h 5m", "4m 10s", "12s".
std::string FormatUptime(int64_t ms) {
  const int64_t s = ms / 1000;
  if (s >= 86400) return absl::StrCat(s / 86400, "d ", s % 86400 / 3600, "h");
  if (s >= 3600) return absl::StrCat(s / 3600, "h ", s % 3600 / 60, "m");
  if (s >= 60) return absl::StrCat(s / 60, "m ", s % 60, "s");
  return absl::StrCat(s, "s");
}

}  // namespace

// "812 KiB", "12.3 MiB", "1.5 GiB".
std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1024 * 1024) {
    return absl::StrCat((bytes + 512) / 1024, " KiB");
  }
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  return mib < 1024 ? absl::StrFormat("%.1f MiB", mib) : absl::StrFormat("%.1f GiB", mib / 1024);
}

std::string ShowText(const v1::AgentInstance& i) {
  std::string out;
  absl::StrAppend(&out, "name:            ", i.name(), "\n");
  absl::StrAppend(&out, "kind:            ", i.kind(), "\n");
  absl::StrAppend(&out, "state:           ", StateName(i.state()),
                  i.cause().empty() ? "" : absl::StrCat(" (", i.cause(), ")"), "\n");
  if (i.has_pid()) {
    absl::StrAppend(&out, "pid:             ", i.pid(), "\n");
  }
  if (i.has_started_at_unix_ms()) {
    absl::StrAppend(&out, "started:         ", FormatTime(i.started_at_unix_ms()), "\n");
    if (i.state() == v1::AGENT_STATE_RUNNING || i.state() == v1::AGENT_STATE_PAUSED) {
      const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
      absl::StrAppend(&out, "uptime:          ",
                      FormatUptime(std::max<int64_t>(0, now_ms - i.started_at_unix_ms())), "\n");
    }
  }
  if (i.has_resources()) {
    absl::StrAppend(&out, "cpu:             ", absl::StrFormat("%.2f", i.resources().cpu_seconds()),
                    " s (", i.resources().processes(), " process",
                    i.resources().processes() == 1 ? "" : "es", ")\n");
    absl::StrAppend(&out, "memory (rss):    ", FormatBytes(i.resources().resident_memory_bytes()),
                    "\n");
  }
  absl::StrAppend(&out, "restart policy:  ", RestartPolicyName(i.restart_policy()),
                  " (restarts: ", i.restart_count(), ")\n");
  absl::StrAppend(&out, "metering:        ", MeteringSourceName(i.metering_source()), "\n");
  if (!i.proxy_url().empty()) {
    absl::StrAppend(&out, "proxy:           ", i.proxy_url(), "\n");
  }
  absl::StrAppend(&out, "usage:           ", UsageSummary(i.usage()), " (current run ",
                  i.usage().current_run_input_tokens(), " in / ",
                  i.usage().current_run_output_tokens(), " out",
                  i.usage().has_current_run_dollars()
                      ? absl::StrCat(" ", FormatDollars(i.usage().current_run_dollars()))
                      : std::string(),
                  ")",
                  i.usage().unknown_usage_calls() > 0
                      ? absl::StrCat(", ", i.usage().unknown_usage_calls(),
                                     i.usage().unknown_usage_calls() == 1 ? " call" : " calls",
                                     " with unknown usage")
                      : std::string(),
                  "\n");
  absl::StrAppend(&out, "budget:          ", BudgetSummary(i), "\n");
  absl::StrAppend(&out, "memory:          ",
                  i.memory().kind() == v1::MEMORY_KIND_FILESYSTEM ? "filesystem"
                  : i.memory().kind() == v1::MEMORY_KIND_NATIVE   ? "native"
                                                                  : "—",
                  "\n");
  absl::StrAppend(&out, "home:            ", i.agent_home(), "\n\n");
  out += CapabilityTable(i);
  return out;
}

std::string StatusText(const v1::GetStatusResponse& s) {
  std::string out;
  absl::StrAppend(&out, "ktesiod ", s.version().daemon_version(), " (api ",
                  s.version().api_version(), ", contract ", s.version().contract_version(), ")\n");
  absl::StrAppend(&out, "pid:        ", s.pid(), "\n");
  absl::StrAppend(&out, "uptime:     ", s.uptime_ms() / 1000, " s (since ",
                  FormatTime(s.started_at_unix_ms()), ")\n");
  absl::StrAppend(&out, "mode:       ", s.system_mode() ? "system" : "user", "\n");
  absl::StrAppend(&out, "state dir:  ", s.state_dir(), "\n");
  absl::StrAppend(&out, "socket:     ", s.socket_path(), "\n");
  std::map<std::string, uint32_t> by_state(s.instances_by_state().begin(),
                                           s.instances_by_state().end());
  std::vector<std::string> parts;
  for (const auto& [state, count] : by_state) {
    parts.push_back(absl::StrCat(count, " ", state));
  }
  absl::StrAppend(&out, "instances:  ", s.instances_total(),
                  parts.empty() ? "" : absl::StrCat(" (", absl::StrJoin(parts, ", "), ")"), "\n");
  if (!s.metrics_address().empty()) {
    absl::StrAppend(&out, "metrics:    ", s.metrics_address(), " (GET /metrics)\n");
  }
  if (s.problems().empty()) {
    absl::StrAppend(&out, "health:     ok\n");
  }
  for (const std::string& problem : s.problems()) {
    absl::StrAppend(&out, "health:     degraded: ", problem, "\n");
  }
  return out;
}

}  // namespace ktesio::cli
