#include "metering/proxy/admission.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ktesio::daemon::metering {

Admission::Admission(AdmissionLimits limits, Clock clock)
    : limits_(limits), clock_(std::move(clock)) {}

bool Admission::TryAdmit(size_t* instance_open) {
  absl::MutexLock lock(&mu_);
  if (*instance_open >= limits_.per_instance || open_ >= limits_.total) {
    ++refused_total_;
    ++refused_unreported_;
    last_trouble_ = clock_();
    return false;
  }
  ++*instance_open;
  ++open_;
  return true;
}

void Admission::Release(size_t* instance_open) {
  absl::MutexLock lock(&mu_);
  --*instance_open;
  --open_;
}

std::chrono::milliseconds Admission::OnResourceError() {
  absl::MutexLock lock(&mu_);
  ++errors_total_;
  ++errors_unreported_;
  last_trouble_ = clock_();
  backoff_ =
      std::clamp(backoff_ * 2, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  return backoff_;
}

void Admission::OnAccepted() {
  absl::MutexLock lock(&mu_);
  backoff_ = std::chrono::milliseconds(0);
}

std::string Admission::DueReport(const std::string& last_error) {
  absl::MutexLock lock(&mu_);
  const auto now = clock_();
  if ((refused_unreported_ == 0 && errors_unreported_ == 0) ||
      (last_report_ != std::chrono::steady_clock::time_point{} &&
       now - last_report_ < kReportInterval)) {
    return "";
  }
  std::string line;
  if (refused_unreported_ > 0) {
    absl::StrAppend(&line, "refused ", refused_unreported_,
                    refused_unreported_ == 1 ? " connection" : " connections",
                    " over the caps (per agent ", limits_.per_instance, ", total ", limits_.total,
                    ")");
  }
  if (errors_unreported_ > 0) {
    absl::StrAppend(&line, line.empty() ? "" : " and ", errors_unreported_,
                    errors_unreported_ == 1 ? " accept" : " accepts", " failed (", last_error,
                    "; backing off up to 1 s)");
  }
  const bool first = last_report_ == std::chrono::steady_clock::time_point{};
  absl::StrAppend(&line, first ? " (further reports at most every " : " in the last ",
                  kReportInterval.count(), first ? " s)" : " s");
  refused_unreported_ = 0;
  errors_unreported_ = 0;
  last_report_ = now;
  return line;
}

bool Admission::HasUnreported() const {
  absl::MutexLock lock(&mu_);
  return refused_unreported_ > 0 || errors_unreported_ > 0;
}

Admission::Pressure Admission::Snapshot() const {
  absl::MutexLock lock(&mu_);
  Pressure pressure;
  pressure.open = open_;
  pressure.limits = limits_;
  pressure.refused_total = refused_total_;
  pressure.resource_errors_total = errors_total_;
  pressure.recent = last_trouble_ != std::chrono::steady_clock::time_point{} &&
                    clock_() - last_trouble_ < kRecent;
  return pressure;
}

}  // namespace ktesio::daemon::metering
