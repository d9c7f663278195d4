#include "engine/call_recorder.h"

#include <iterator>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/status_macros.h"
#include "logs/segments.h"
#include "metering/ledger.h"

namespace ktesio::daemon::engine {

CallRecorder::CallRecorder(OwnerContext context, Hooks hooks, size_t max_unrecorded)
    : context_(std::move(context)),
      hooks_(std::move(hooks)),
      max_unrecorded_(max_unrecorded),
      retry_timer_(context_.clock->NewTimer()) {}

void CallRecorder::Queue(metering::CallRecord record) {
  std::vector<metering::CallRecord> one;
  one.push_back(std::move(record));
  Queue(std::move(one));
}

void CallRecorder::Queue(std::vector<metering::CallRecord> records) {
  if (records.empty()) {
    return;
  }
  // Calls finishing together are committed together (one transaction per instance per batch),
  // and only the first of a batch pays for waking the engine thread.
  bool wake = false;
  {
    absl::MutexLock lock(&mu_);
    if (pending_.empty()) {
      pending_ = std::move(records);
    } else {
      pending_.insert(pending_.end(), std::make_move_iterator(records.begin()),
                      std::make_move_iterator(records.end()));
    }
    wake = !flush_posted_;
    flush_posted_ = true;
  }
  if (wake) {
    hooks_.post([this] { Flush(); });
  }
}

void CallRecorder::Flush() {
  std::vector<metering::CallRecord> batch;
  {
    absl::MutexLock lock(&mu_);
    batch.swap(pending_);
    flush_posted_ = false;
  }
  std::map<std::string, std::vector<metering::CallRecord>> by_instance;
  for (metering::CallRecord& record : batch) {
    by_instance[record.instance].push_back(std::move(record));
  }
  std::vector<metering::CallRecord> unrecorded;
  absl::Status last_error;
  for (auto& [name, records] : by_instance) {
    if (absl::Status status = Record(name, records); !status.ok()) {
      last_error = status;
      for (metering::CallRecord& record : records) {
        unrecorded.push_back(std::move(record));
      }
    }
  }
  if (!unrecorded.empty()) {
    Keep(std::move(unrecorded), last_error);
    return;
  }
  if (retry_attempts_ > 0) {
    context_.log->info("metered calls recorded after {} failed attempt(s)", retry_attempts_);
    retry_attempts_ = 0;
    context_.health->Set("store:metering", "");
  }
}

void CallRecorder::Keep(std::vector<metering::CallRecord> unrecorded, const absl::Status& error) {
  size_t kept = 0;
  {
    absl::MutexLock lock(&mu_);
    unrecorded.insert(unrecorded.end(), std::make_move_iterator(pending_.begin()),
                      std::make_move_iterator(pending_.end()));
    if (unrecorded.size() > max_unrecorded_) {
      dropped_ += unrecorded.size() - max_unrecorded_;
      unrecorded.erase(
          unrecorded.begin(),
          unrecorded.begin() + static_cast<std::ptrdiff_t>(unrecorded.size() - max_unrecorded_));
    }
    pending_ = std::move(unrecorded);
    kept = pending_.size();
    flush_posted_ = true;  // the retry timer flushes; new calls need no extra wake-up
  }
  const int64_t delay_ms = std::min<int64_t>(int64_t{100} << std::min(retry_attempts_, 6), 5000);
  retry_attempts_ += 1;
  context_.health->Set(
      "store:metering",
      absl::StrCat(kept, " metered call(s) not recorded yet: ", error.message(),
                   "; retrying every ", delay_ms, " ms",
                   dropped_ > 0 ? absl::StrCat(" (", dropped_, " dropped beyond the bound of ",
                                               max_unrecorded_, ")")
                                : std::string()));
  retry_timer_->Arm(std::chrono::milliseconds(delay_ms), [this] { Flush(); });
}

absl::Status CallRecorder::Record(const std::string& name,
                                  const std::vector<metering::CallRecord>& records) {
  KT_ASSIGN_OR_RETURN(std::optional<store::InstanceRow> found, context_.store->FindInstance(name));
  if (!found.has_value()) {
    return absl::OkStatus();  // removed meanwhile: nothing to charge
  }
  const store::InstanceRow& row = *found;
  const int64_t run = row.current_run;
  const budget::Limits limits = context_.config->Limits(row);
  std::vector<budget::Breach> breaches;
  size_t known = 0;
  absl::Status status = context_.store->InTransaction([&]() -> absl::Status {
    KT_ASSIGN_OR_RETURN(int64_t next, context_.store->NextSequence(row.id, run));
    KT_ASSIGN_OR_RETURN(metering::LedgerWriter ledger,
                        metering::LedgerWriter::Begin(*context_.store, row, run, "engine-observed",
                                                      limits, context_.clock->NowUnixMs()));
    uint64_t sequence = static_cast<uint64_t>(next);
    for (const metering::CallRecord& record : records) {
      // Whether the call was new is not needed: the sequence numbers are fresh.
      KT_RETURN_IF_ERROR((record.known
                              ? ledger.Add(sequence, record.usage.input, record.usage.output)
                              : ledger.AddUnknown(sequence, metering::ApiShapeName(record.shape)))
                             .status());
      ++sequence;
      known += record.known ? 1 : 0;
    }
    breaches = ledger.breaches();
    return ledger.Finish();
  });
  if (!status.ok()) {
    context_.log->error("metered calls not recorded instance={} run={} calls={} error={}", row.name,
                        run, records.size(), std::string(status.message()));
    return status;
  }
  hooks_.on_recorded(row, records, known > 0);
  for (const metering::CallRecord& record : records) {
    if (record.known) {
      continue;
    }
    const std::string api(metering::ApiShapeName(record.shape));
    context_.log->info("model call without usage instance={} run={} api={}", row.name, run, api);
    logs::AppendEngineLine(row.home + "/logs", context_.clock->NowUnixMs(),
                           absl::StrCat("model call (", api,
                                        ") without usage (none from the provider, or the call "
                                        "was cut off): counted as unknown, not as zero tokens"))
        .IgnoreError();  // informational: the unknown-usage row is the record
  }
  if (!breaches.empty()) {
    hooks_.on_breach(row, run, breaches, limits);
  }
  return absl::OkStatus();
}

}  // namespace ktesio::daemon::engine
