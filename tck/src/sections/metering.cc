// Sections metering_self_reported and metering_engine_observed.

#include <thread>

#include "kit_internal.h"
#include "ktesio/contract/status_macros.h"
#include "loopback_http.h"

namespace ktesio::tck::internal {

absl::StatusOr<Kit::Outcome> Kit::MeteringSelfReported() {
  if (d_.metering != c::MeteringSource::kSelfReported) {
    return Outcome{kNotApplicable,
                   "source = \"" + Str(c::MeteringSourceName(d_.metering)) + "\" (declared)"};
  }
  const std::string name = NewName("metering_self_reported");
  if (subject_mode()) {
    return SubjectReportsUsage(name);
  }
  KT_RETURN_IF_ERROR(
      RegisterProbe(name, {"--usage-lines", "20", "--usage-input", "7", "--usage-output", "11",
                           "--usage-replay", "--heartbeat-ms", "1000"}));
  KT_RETURN_IF_ERROR(StartRunning(name).status());
  auto usage = [&]() -> std::pair<uint64_t, uint64_t> {
    v1::GetUsageRequest request;
    request.set_name(name);
    v1::GetUsageResponse response;
    if (!agents_->GetUsage(Ctx(milliseconds(5000)).get(), request, &response).ok()) {
      return {0, 0};
    }
    return {response.usage().cumulative_input_tokens(),
            response.usage().cumulative_output_tokens()};
  };
  std::pair<uint64_t, uint64_t> got{0, 0};
  bool reached = deadline_->WaitFor(
      [&] {
        got = usage();
        return got.first >= 140 && got.second >= 220;
      },
      milliseconds(10000));
  auto text = [](std::pair<uint64_t, uint64_t> u) {
    return std::to_string(u.first) + "/" + std::to_string(u.second);
  };
  if (!reached) {
    return Outcome{kFail, "20 usage lines of 7/11 tokens: cumulative usage is " + text(got) +
                              ", expected 140/220"};
  }
  std::this_thread::sleep_for(milliseconds(1500));
  got = usage();
  if (got.first != 140 || got.second != 220) {
    return Outcome{kFail, "cumulative usage is " + text(got) +
                              ", expected exactly 140/220 (the replayed line must not count)"};
  }
  return Outcome{kPass, ""};
}

// Subject mode: the subject's own program must report usage unprompted — at least one
// usage_update event (a KTESIO_USAGE line the engine accepted) within 10 s of running. Its
// numbers and the replay dedup cannot be checked against a program the kit does not drive.
absl::StatusOr<Kit::Outcome> Kit::SubjectReportsUsage(const std::string& name) {
  KT_RETURN_IF_ERROR(RegisterSubjectToRun(name));
  KT_RETURN_IF_ERROR(StartRunning(name).status());
  const bool reported = WatchEvents(name, milliseconds(10000), [](const v1::Event& event) {
    return event.type() == "usage_update";
  });
  if (reported) {
    return Outcome{kPass, ""};
  }
  return Outcome{kFail,
                 "no usage reported by the subject within 10 s of running: " + WhyNoUsage(name)};
}

// Why a subject reported no usage: no sentinel line at all, only on stderr, or lines the engine
// refused (malformed).
std::string Kit::WhyNoUsage(const std::string& name) {
  v1::ReadLogsRequest request;
  request.mutable_filter()->set_name(name);
  v1::ReadLogsResponse response;
  long long out_lines = 0, err_lines = 0;
  std::string first;
  if (logs_->ReadLogs(Ctx(milliseconds(5000)).get(), request, &response).ok()) {
    for (const v1::LogLine& line : response.lines()) {
      const size_t at = line.text().find_first_not_of(" \t");
      if (at == std::string::npos || line.text().compare(at, 12, "KTESIO_USAGE") != 0) {
        continue;
      }
      if (line.stream() == v1::LOG_STREAM_AGENT_OUT) {
        if (out_lines++ == 0) {
          first = line.text();
        }
      } else if (line.stream() == v1::LOG_STREAM_AGENT_ERR) {
        ++err_lines;
      }
    }
  }
  if (out_lines > 0) {
    return "its stdout carried " + std::to_string(out_lines) +
           " KTESIO_USAGE lines but the engine accepted none (first: '" + first + "')";
  }
  return "its captured stdout carries no KTESIO_USAGE line" +
         (err_lines > 0 ? " (" + std::to_string(err_lines) + " on stderr, which is not metered)"
                        : std::string()) +
         "; source = \"self-reported\" (declared) needs KTESIO_USAGE "
         "{\"sequence\":N,\"input_tokens\":N,\"output_tokens\":N} lines on stdout";
}

absl::StatusOr<Kit::Outcome> Kit::MeteringEngineObserved() {
  if (d_.metering != c::MeteringSource::kEngineObserved) {
    return Outcome{kNotApplicable,
                   "source = \"" + Str(c::MeteringSourceName(d_.metering)) + "\" (declared)"};
  }
  // The kit is the provider: a known usage per call, and one call with none.
  absl::StatusOr<std::unique_ptr<LoopbackProvider>> provider = LoopbackProvider::Start();
  if (!provider.ok()) {
    return absl::UnavailableError("cannot listen on 127.0.0.1 for the kit's provider");
  }
  const std::string name = NewName("metering_engine_observed");
  UseArgvWrapperIfFlags(name);
  KT_RETURN_IF_ERROR(
      RegisterProbe(name, {"--heartbeat-ms", "1000"}, c::MeteringSource::kEngineObserved));
  KT_RETURN_IF_ERROR(SetConfig(name, "metering.upstream_base_url",
                               "http://127.0.0.1:" + std::to_string((*provider)->port()) + "/v1"));
  KT_ASSIGN_OR_RETURN(const v1::AgentInstance running, StartRunning(name));
  const std::string& url = running.proxy_url();
  if (url.empty()) {
    return Outcome{kFail, "a running engine-observed instance has no proxy_url"};
  }
  if (auto mapping = d_.config.find("metering.base_url"); mapping != d_.config.end()) {
    KT_ASSIGN_OR_RETURN(const Delivery got, ReadDelivery(running));
    const std::string problem = CheckDelivered(got, "metering.base_url", mapping->second, url);
    if (!problem.empty()) {
      return Outcome{kFail, problem};
    }
  }
  return ProxiedCallsMetered(name, url, **provider);
}

// Two chat completions through the proxy at `proxy_url` (one reporting usage, one not) reach
// `provider` at the upstream path and are metered as exactly 123/45 tokens with 1 unknown call.
Kit::Outcome Kit::ProxiedCallsMetered(const std::string& name, const std::string& proxy_url,
                                      const LoopbackProvider& provider) {
  for (const char* model : {"tck-usage", "tck-no-usage"}) {
    const absl::StatusOr<int> status =
        LoopbackPost(proxy_url + "/chat/completions", std::string(R"({"model":")") + model + "\"}");
    if (!status.ok() || *status != 200) {
      return Outcome{kFail, "a call through the proxy answered " +
                                (status.ok() ? "HTTP " + std::to_string(*status)
                                             : std::string(status.status().message()))};
    }
  }
  const std::vector<std::string> targets = provider.Targets();
  if (targets.size() != 2 || targets[0] != "/v1/chat/completions") {
    return Outcome{kFail,
                   "the provider did not receive the calls at the upstream path "
                   "/v1/chat/completions"};
  }
  v1::UsageView usage;
  const bool reached = deadline_->WaitFor(
      [&] {
        v1::GetUsageRequest request;
        request.set_name(name);
        v1::GetUsageResponse response;
        if (!agents_->GetUsage(Ctx(milliseconds(5000)).get(), request, &response).ok()) {
          return false;
        }
        usage = response.usage();
        return usage.cumulative_input_tokens() >= LoopbackProvider::kInputTokens &&
               usage.unknown_usage_calls() >= 1;
      },
      milliseconds(10000));
  const std::string seen = std::to_string(usage.cumulative_input_tokens()) + "/" +
                           std::to_string(usage.cumulative_output_tokens()) + " with " +
                           std::to_string(usage.unknown_usage_calls()) + " unknown";
  if (!reached || usage.cumulative_input_tokens() != LoopbackProvider::kInputTokens ||
      usage.cumulative_output_tokens() != LoopbackProvider::kOutputTokens ||
      usage.unknown_usage_calls() != 1) {
    return Outcome{kFail, "after one call reporting 123/45 and one reporting nothing, usage is " +
                              seen + " (expected exactly 123/45 with 1 unknown)"};
  }
  return Outcome{kPass, ""};
}

}  // namespace ktesio::tck::internal
