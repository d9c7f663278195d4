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
                                             const std::string& metering_source, int64_t now_ms) {
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
    absl::StatusOr<store::Statement> insert = store.db().Prepare(
        "INSERT OR IGNORE INTO usage_events (instance_id, run, sequence, input_tokens, "
        "output_tokens, source, at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    absl::StatusOr<store::Statement> event = store.db().Prepare(
        "INSERT INTO events (at_ms, instance, type, payload) VALUES (?1, ?2, 'usage_update', ?3)");
    absl::StatusOr<store::Statement> cursor = store.db().Prepare(
        "UPDATE runs SET usage_offset = ?3 WHERE instance_id = ?1 AND run = ?2");
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
