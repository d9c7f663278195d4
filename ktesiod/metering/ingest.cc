#include "metering/ingest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/status_macros.h"
#include "ktesio/contract/usage_line.h"
#include "metering/ledger.h"

namespace ktesio::daemon::metering {
namespace {

// Reads the bytes of `path` from `offset` to the end.
std::string ReadFrom(const std::string& path, int64_t offset) {
  std::string data;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return data;
  }
  struct stat st {};
  if (fstat(fd, &st) == 0 && st.st_size > offset) {
    data.reserve(static_cast<size_t>(st.st_size - offset));  // one allocation for the usual case
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
  absl::Status status = store.InTransaction([&]() -> absl::Status {
    absl::StatusOr<LedgerWriter> ledger =
        LedgerWriter::Begin(store, row, run, metering_source, limits, now_ms);
    if (!ledger.ok()) {
      return ledger.status();
    }
    KT_ASSIGN_OR_RETURN(
        store::Statement cursor,
        store.db().Prepare(
            "UPDATE runs SET usage_offset = ?3 WHERE instance_id = ?1 AND run = ?2"));
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
      KT_ASSIGN_OR_RETURN(bool added,
                          ledger->Add(report.sequence, report.input_tokens, report.output_tokens));
      ++(added ? result.accepted : result.duplicates);
    }
    KT_RETURN_IF_ERROR(ledger->Finish());
    result.breaches = ledger->breaches();
    cursor.Bind(1, row.id).Bind(2, run).Bind(3, new_offset);
    return cursor.Run();
  });
  if (!status.ok()) {
    return status;
  }
  return result;
}

}  // namespace ktesio::daemon::metering
