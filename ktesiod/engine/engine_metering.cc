// The engine's engine-observed metering: a loopback proxy per instance, opened at start (its URL
// injected at `metering.base_url`), closed when the agent leaves its run, re-opened on the SAME
// port for agents re-adopted after a daemon restart. The ledger writes of its call records are
// CallRecorder's.

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "config/layers.h"
#include "engine/engine.h"
#include "fs/fs.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"
#include "logs/segments.h"

namespace ktesio::daemon::engine {
namespace {

constexpr char kUpstreamKey[] = "metering.upstream_base_url";
constexpr std::string_view kLoopbackHosts[] = {"127.0.0.1", "localhost", "::1"};

// NO_PROXY (both spellings) with the loopback hosts added: agents honour HTTP_PROXY even for a
// loopback base URL, which would route metered traffic around the proxy.
void AddLoopbackNoProxy(const v1::AdapterSnapshot& snapshot, supervisor::Delivery& delivery) {
  for (const char* name : {"NO_PROXY", "no_proxy"}) {
    std::string value;
    if (auto it = snapshot.start().env().find(name); it != snapshot.start().env().end()) {
      value = it->second;
    }
    auto delivered = std::find_if(delivery.env.begin(), delivery.env.end(),
                                  [&](const auto& entry) { return entry.first == name; });
    if (delivered != delivery.env.end()) {
      value = delivered->second;
    }
    std::vector<std::string> hosts = absl::StrSplit(value, ',', absl::SkipWhitespace());
    for (std::string_view loopback : kLoopbackHosts) {
      if (std::find(hosts.begin(), hosts.end(), loopback) == hosts.end()) {
        hosts.emplace_back(loopback);
      }
    }
    const std::string merged = absl::StrJoin(hosts, ",");
    if (delivered != delivery.env.end()) {
      delivered->second = merged;
    } else {
      delivery.env.emplace_back(name, merged);
    }
  }
}

}  // namespace

std::string Engine::ProxyUrl(const std::string& name) const {
  const uint16_t port = proxy_ ? proxy_->Port(name) : 0;
  return port == 0 ? std::string()
                   : absl::StrCat("http://127.0.0.1:", port, proxy_->PathPrefix(name));
}

absl::StatusOr<metering::Upstream> Engine::UpstreamFor(const store::InstanceRow& row) const {
  KT_ASSIGN_OR_RETURN(std::vector<config::Entry> entries, config_.Effective(row));
  std::optional<std::string> url = config::Lookup(entries, kUpstreamKey);
  if (!url.has_value() || url->empty()) {
    return contract::MakeError(
        absl::StatusCode::kFailedPrecondition, contract::reason::kConfigInvalid,
        absl::StrCat("'", row.name, "' is metered engine-observed and '", kUpstreamKey,
                     "' is not set: set it to the provider's base URL (ktctl agent config set ",
                     row.name, " ", kUpstreamKey, " https://api.openai.com/v1)"));
  }
  return metering::ParseUpstream(kUpstreamKey, *url);
}

absl::Status Engine::Deliverable(const store::InstanceRow& row,
                                 const v1::AdapterSnapshot& snapshot) const {
  if (snapshot.metering_source() != v1::METERING_SOURCE_ENGINE_OBSERVED) {
    return config_.Deliverable(row, snapshot, "");
  }
  KT_RETURN_IF_ERROR(UpstreamFor(row).status());
  // The URL a start injects differs only in its port and path, which no check depends on.
  return config_.Deliverable(row, snapshot, "http://127.0.0.1:1/");
}

absl::StatusOr<supervisor::Delivery> Engine::DeliverFor(const store::InstanceRow& row,
                                                        const v1::AdapterSnapshot& snapshot) {
  if (snapshot.metering_source() != v1::METERING_SOURCE_ENGINE_OBSERVED) {
    return config_.Deliver(row, snapshot, "");
  }
  KT_ASSIGN_OR_RETURN(metering::Upstream upstream, UpstreamFor(row));
  absl::StatusOr<int64_t> previous = store_->ProxyPort(row.id);
  const uint16_t preferred =
      previous.ok() && *previous > 0 && *previous < 65536 ? static_cast<uint16_t>(*previous) : 0;
  const std::string prefix = ProxyPathPrefix(proxy_key_.key, row.name, row.registered_at_ms);
  ::unlink((row.home + "/.proxy-path-legacy").c_str());  // a fresh start learns the path
  KT_ASSIGN_OR_RETURN(uint16_t port,
                      proxy_->Open(row.name, upstream, preferred, /*exact=*/false, prefix));
  if (absl::Status saved = store_->SetProxyPort(row.id, port); !saved.ok()) {
    proxy_->Close(row.name);
    return saved;
  }
  absl::StatusOr<supervisor::Delivery> delivery =
      config_.Deliver(row, snapshot, absl::StrCat("http://127.0.0.1:", port, prefix));
  if (!delivery.ok()) {
    proxy_->Close(row.name);
    return delivery.status();
  }
  AddLoopbackNoProxy(snapshot, *delivery);
  return delivery;
}

void Engine::ReopenProxies() {
  absl::StatusOr<std::vector<store::InstanceRow>> rows = store_->ListInstances();
  if (!rows.ok()) {
    return;
  }
  for (const store::InstanceRow& row : *rows) {
    if (!supervisor::IsLive(supervisor::RowState(row))) {
      continue;
    }
    v1::AdapterSnapshot snapshot;
    if (!snapshot.ParseFromString(row.snapshot) ||
        snapshot.metering_source() != v1::METERING_SOURCE_ENGINE_OBSERVED) {
      continue;
    }
    absl::StatusOr<int64_t> port = store_->ProxyPort(row.id);
    absl::StatusOr<std::vector<config::Entry>> entries = config_.Effective(row);
    absl::Status status = absl::OkStatus();
    if (!port.ok()) {
      status = port.status();
    } else if (!entries.ok()) {
      status = entries.status();
    } else {
      absl::StatusOr<metering::Upstream> upstream = metering::ParseUpstream(
          kUpstreamKey, config::Lookup(*entries, kUpstreamKey).value_or(""));
      if (!upstream.ok()) {
        status = upstream.status();
      } else {
        // Exactly the old port and path: the running agent's base URL names them. Agents
        // started before the daemon had a proxy key were given prefix-less URLs: their
        // listener accepts any path until they restart.
        const std::string legacy_marker = row.home + "/.proxy-path-legacy";
        const bool legacy = proxy_key_.created_now || fs::Exists(legacy_marker);
        if (proxy_key_.created_now) {
          // Remembered until the agent restarts, across further daemon restarts.
          fs::WriteFileAtomic(legacy_marker, "", 0600).IgnoreError();  // best effort: a lost
          // marker only makes the next daemon demand the path this agent does not know
        }
        const std::string prefix =
            legacy ? std::string()
                   : ProxyPathPrefix(proxy_key_.key, row.name, row.registered_at_ms);
        if (prefix.empty()) {
          log_->warn(
              "metering proxy of re-adopted agent accepts any path until it restarts "
              "(started before per-agent proxy paths) instance={}",
              row.name);
        }
        status =
            proxy_->Open(row.name, *upstream, static_cast<uint16_t>(*port), true, prefix).status();
        // A budget breach's block outlives the daemon: it lasts until the operator resumes (also
        // for a breach made while the operator had it paused, whose cause stays `paused`).
        const bool held = supervisor::RowState(row) == supervisor::State::kPaused ||
                          supervisor::RowState(row) == supervisor::State::kStopping;
        if (status.ok() && held &&
            (row.cause.starts_with("budget-exceeded") ||
             store_->RunBreachedToBlock(row.id, row.current_run).value_or(false))) {
          proxy_->Block(row.name);
        }
      }
    }
    if (!status.ok()) {
      log_->error("metering proxy not re-opened for re-adopted agent instance={} error={}",
                  row.name, std::string(status.message()));
      unopened_proxies_[row.name] = std::string(status.message());  // daemon status says so
      logs::AppendEngineLine(row.home + "/logs", clock_->NowUnixMs(),
                             absl::StrCat("metering proxy could not be re-opened after the daemon "
                                          "restarted (model calls will fail, or reach whatever "
                                          "now holds the port, until the agent is restarted): ",
                                          std::string(status.message())))
          .IgnoreError();  // informational: the daemon log above has it
    }
  }
  ReportUnopenedProxies();
}

}  // namespace ktesio::daemon::engine
