#include "metering/ingest.h"

#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/json_writer.h"
#include "ktesio/contract/usage_line.h"
#include "logs/segments.h"

namespace ktesio::daemon::metering {
namespace {

// Reads the bytes of `path` from `offset` to the end.
std::string ReadFrom(const std::string& path, int64_t offset) {
  std::string data;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return data;
  }
  char buffer[1 << 16];
  off_t at = static_cast<off_t>(offset);
  while (true) {
    ssize_t n = pread(fd, buffer, sizeof(buffer), at);
    if (n <= 0) {
      break;
    }
    data.append(buffer, static_cast<size_t>(n));
    at += n;
  }
  close(fd);
  return data;
}

}  // namespace

std::string UsageFilePath(const std::string& run_dir, int64_t run) {
  return absl::StrCat(run_dir, "/usage-", run, ".log");
}

absl::StatusOr<IngestResult> IngestUsageFile(store::Store& store, const store::InstanceRow& row,
                                             int64_t run, const std::string& path,
                                             const std::string& metering_source,
                                             const budget::Limits& limits, int64_t now_ms) {
  IngestResult result;
  absl::StatusOr<int64_t> offset = store.UsageOffset(row.id, run);
  if (!offset.ok()) {
    return offset.status();
  }
  const std::string data = ReadFrom(path, *offset);
  const size_t complete = data.rfind('\n');
  if (complete == std::string::npos) {
    return result;  // nothing complete yet
  }
  const int64_t new_offset = *offset + static_cast<int64_t>(complete + 1);
  const std::string at = logs::FormatLogTime(now_ms);
  absl::Status status = store.InTransaction([&]() -> absl::Status {
    // Totals and fired dimensions as of this transaction: budgets see every earlier event.
    absl::StatusOr<store::Store::UsageTotals> before = store.Usage(row.id, run);
    if (!before.ok()) {
      return before.status();
    }
    budget::Totals totals;
    totals.run_tokens = before->run_input + before->run_output;
    totals.cumulative_tokens = before->cumulative_input + before->cumulative_output;
    if (limits.rate.has_value()) {
      totals.run_dollars = before->run_micros;
      totals.cumulative_dollars = before->cumulative_micros;
    }
    budget::Fired fired;
    absl::StatusOr<store::Statement> fired_rows = store.db().Prepare(
        "SELECT scope, dimension FROM breaches WHERE instance_id = ?1 AND run = ?2");
    if (!fired_rows.ok()) {
      return fired_rows.status();
    }
    fired_rows->Bind(1, row.id).Bind(2, run);
    while (true) {
      absl::StatusOr<bool> next = fired_rows->Step();
      if (!next.ok()) {
        return next.status();
      }
      if (!*next) {
        break;
      }
      fired.insert(
          {fired_rows->ColumnText(0) == "run" ? budget::Scope::kRun : budget::Scope::kCumulative,
           fired_rows->ColumnText(1) == "tokens" ? budget::Dimension::kTokens
                                                 : budget::Dimension::kDollars});
    }
    absl::StatusOr<store::Statement> breach = store.db().Prepare(
        "INSERT OR IGNORE INTO breaches (instance_id, run, scope, dimension, limit_value, "
        "observed, action, at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    absl::StatusOr<store::Statement> breach_event = store.db().Prepare(
        "INSERT INTO events (at_ms, instance, type, payload) VALUES (?1, ?2, 'budget_breach', "
        "?3)");
    if (!breach.ok() || !breach_event.ok()) {
      return !breach.ok() ? breach.status() : breach_event.status();
    }
    absl::StatusOr<store::Statement> insert = store.db().Prepare(
        "INSERT OR IGNORE INTO usage_events (instance_id, run, sequence, input_tokens, "
        "output_tokens, source, at_ms, cost_micros) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    absl::StatusOr<store::Statement> event = store.db().Prepare(
        "INSERT INTO events (at_ms, instance, type, payload) VALUES (?1, ?2, 'usage_update', ?3)");
    absl::StatusOr<store::Statement> cursor =
        store.db().Prepare("UPDATE runs SET usage_offset = ?3 WHERE instance_id = ?1 AND run = ?2");
    if (!insert.ok() || !event.ok() || !cursor.ok()) {
      return !insert.ok() ? insert.status() : !event.ok() ? event.status() : cursor.status();
    }
    size_t start = 0;
    while (start <= complete) {
      size_t nl = data.find('\n', start);
      std::string_view line(data.data() + start, nl - start);
      start = nl + 1;
      contract::UsageLineResult parsed = contract::ParseUsageLine(line);
      if (parsed.kind == contract::UsageLineKind::kNotUsage) {
        continue;
      }
      if (parsed.kind == contract::UsageLineKind::kMalformed) {
        result.malformed.push_back(parsed.error);
        continue;
      }
      const contract::UsageReport& report = parsed.report;
      if (report.sequence > static_cast<uint64_t>(INT64_MAX) ||
          report.input_tokens > static_cast<uint64_t>(INT64_MAX) ||
          report.output_tokens > static_cast<uint64_t>(INT64_MAX)) {
        result.malformed.push_back("a value exceeds the ledger's 64-bit signed range");
        continue;
      }
      insert->Reset();
      insert->Bind(1, row.id).Bind(2, run).Bind(3, static_cast<int64_t>(report.sequence));
      insert->Bind(4, static_cast<int64_t>(report.input_tokens));
      insert->Bind(5, static_cast<int64_t>(report.output_tokens));
      insert->Bind(6, metering_source).Bind(7, now_ms);
      std::optional<int64_t> cost;
      if (limits.rate.has_value()) {
        cost = budget::PriceEvent(report.input_tokens, report.output_tokens, *limits.rate);
      }
      insert->Bind(8, cost);
      if (absl::Status s = insert->Run(); !s.ok()) {
        return s;
      }
      if (sqlite3_changes(store.db().raw()) == 0) {
        ++result.duplicates;
        continue;
      }
      ++result.accepted;
      contract::JsonWriter payload;
      payload.BeginObject().Key("schema_version").Int(1).Key("instance").String(row.name);
      payload.Key("run_id").Int(run).Key("input_tokens").Uint(report.input_tokens);
      payload.Key("output_tokens").Uint(report.output_tokens);
      payload.Key("metering_source").String(metering_source);
      payload.Key("sequence").Uint(report.sequence).Key("occurred_at").String(at).EndObject();
      event->Reset();
      event->Bind(1, now_ms).Bind(2, row.name).Bind(3, payload.str());
      if (absl::Status s = event->Run(); !s.ok()) {
        return s;
      }
      const uint64_t tokens = budget::SaturatingAdd(report.input_tokens, report.output_tokens);
      totals.run_tokens = budget::SaturatingAdd(totals.run_tokens, tokens);
      totals.cumulative_tokens = budget::SaturatingAdd(totals.cumulative_tokens, tokens);
      if (cost.has_value()) {
        totals.run_dollars = budget::SaturatingAdd(*totals.run_dollars, *cost);
        totals.cumulative_dollars = budget::SaturatingAdd(*totals.cumulative_dollars, *cost);
      }
      for (const budget::Breach& crossed : budget::Evaluate(limits, totals, fired)) {
        fired.insert({crossed.scope, crossed.dimension});
        breach->Reset();
        breach->Bind(1, row.id).Bind(2, run).Bind(3, budget::ScopeName(crossed.scope));
        breach->Bind(4, budget::DimensionName(crossed.dimension)).Bind(5, crossed.limit);
        breach->Bind(6, crossed.observed).Bind(7, budget::ActionName(limits.action));
        breach->Bind(8, now_ms);
        if (absl::Status s = breach->Run(); !s.ok()) {
          return s;
        }
        contract::JsonWriter payload_breach;
        payload_breach.BeginObject().Key("schema_version").Int(1).Key("instance").String(row.name);
        payload_breach.Key("run_id").Int(run).Key("scope").String(budget::ScopeName(crossed.scope));
        payload_breach.Key("dimension").String(budget::DimensionName(crossed.dimension));
        payload_breach.Key("limit").Int(crossed.limit).Key("observed").Int(crossed.observed);
        payload_breach.Key("action").String(budget::ActionName(limits.action));
        payload_breach.Key("metering_source").String(metering_source);
        payload_breach.Key("at").String(at).EndObject();
        breach_event->Reset();
        breach_event->Bind(1, now_ms).Bind(2, row.name).Bind(3, payload_breach.str());
        if (absl::Status s = breach_event->Run(); !s.ok()) {
          return s;
        }
        result.breaches.push_back(crossed);
      }
    }
    cursor->Bind(1, row.id).Bind(2, run).Bind(3, new_offset);
    return cursor->Run();
  });
  if (!status.ok()) {
    return status;
  }
  return result;
}

}  // namespace ktesio::daemon::metering
