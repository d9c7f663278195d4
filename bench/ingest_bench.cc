// Self-reported ingestion throughput, the daemon's own code on a real SQLite file: a run's usage
// file grows by BATCH `KTESIO_USAGE` lines at a time and metering::IngestUsageFile commits each
// batch (ledger rows, usage_update events, totals, cursor, budget checks: one transaction), as
// the engine's usage meter does when an agent writes faster than it is woken. Only the ingest
// calls are timed; the file writes are not.
//
//   ktesio_ingest_bench DIR LINES BATCH [priced]
//
// `priced` sets a Rate and a (never reached) token and dollar budget, so every event is priced
// and checked. Prints `key value` lines; the totals are checked against what was written.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "metering/ingest.h"
#include "store/store.h"

namespace {

using namespace ktesio::daemon;  // NOLINT(google-build-using-namespace): a benchmark's main

int Fail(const std::string& what) {
  std::fprintf(stderr, "ingest_bench: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    return Fail("usage: ktesio_ingest_bench DIR LINES BATCH [priced]");
  }
  const std::string dir = argv[1];
  const long lines = std::strtol(argv[2], nullptr, 10);
  const long batch = std::strtol(argv[3], nullptr, 10);
  const bool priced = argc > 4 && std::string(argv[4]) == "priced";
  if (lines <= 0 || batch <= 0) {
    return Fail("LINES and BATCH must be positive");
  }
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  absl::StatusOr<std::unique_ptr<store::Store>> opened = store::Store::Open(dir + "/state.db");
  if (!opened.ok()) {
    return Fail(opened.status().ToString());
  }
  store::Store& store = **opened;
  store::InstanceRow row;
  row.name = "bench";
  row.kind = "usage";
  row.state = "running";
  row.home = dir + "/home";
  row.current_run = 1;
  if (absl::Status s = store.InsertInstance(row); !s.ok()) {
    return Fail(s.ToString());
  }
  if (absl::Status s = store.BeginRun(row.id, 1, 0); !s.ok()) {
    return Fail(s.ToString());
  }
  budget::Limits limits;
  if (priced) {
    limits.rate = budget::Rate{3'000'000, 15'000'000};
    limits.tokens_per_run = UINT64_MAX / 2;
    limits.dollars_cumulative = INT64_MAX / 2;
  }
  const std::string path = dir + "/usage-1.log";
  std::ofstream out(path, std::ios::binary);
  std::chrono::nanoseconds spent{0};
  uint64_t accepted = 0;
  long written = 0;
  while (written < lines) {
    std::string chunk;
    for (long i = 0; i < batch && written < lines; ++i, ++written) {
      chunk += "KTESIO_USAGE {\"sequence\":" + std::to_string(written + 1) +
               ",\"input_tokens\":1,\"output_tokens\":2}\n";
    }
    out << chunk << std::flush;
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<metering::IngestResult> result = metering::IngestUsageFile(
        store, row, 1, path, "self-reported", limits, 1'700'000'000'000 + written);
    spent += std::chrono::steady_clock::now() - t0;
    if (!result.ok()) {
      return Fail(result.status().ToString());
    }
    accepted += result->accepted;
  }
  absl::StatusOr<store::Store::UsageTotals> totals = store.Usage(row.id, 1);
  if (!totals.ok()) {
    return Fail(totals.status().ToString());
  }
  if (accepted != static_cast<uint64_t>(lines) ||
      totals->run_input != static_cast<uint64_t>(lines) ||
      totals->run_output != 2 * static_cast<uint64_t>(lines)) {
    return Fail("the ledger does not hold every line exactly once");
  }
  const double seconds = std::chrono::duration<double>(spent).count();
  std::printf("ingest_lines %ld batch %ld priced %d\n", lines, batch, priced ? 1 : 0);
  std::printf("ingest_seconds %.3f\n", seconds);
  std::printf("ingest_events_per_second %.0f\n", static_cast<double>(lines) / seconds);
  std::filesystem::remove_all(dir);
  return 0;
}
