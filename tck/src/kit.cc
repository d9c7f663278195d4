#include "ktesio/tck/kit.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kit_internal.h"
#include "ktesio/contract/adapter.h"
#include "ktesio/contract/json_writer.h"
#include "ktesio/contract/manifest.h"

namespace ktesio::tck {

using internal::kFail;
using internal::kPass;
namespace c = ::ktesio::contract;

const std::vector<std::string>& AllSections() {
  static const std::vector<std::string> kSections = {"capability_edges",
                                                     "lifecycle",
                                                     "pause",
                                                     "config_mapping",
                                                     "metering_self_reported",
                                                     "metering_engine_observed",
                                                     "memory",
                                                     "interaction"};
  return kSections;
}

Report RunKit(const Options& options) {
  Report report;
  std::vector<std::string> selected;
  for (const std::string& s : AllSections()) {
    if (options.sections.empty() ||
        std::find(options.sections.begin(), options.sections.end(), s) != options.sections.end()) {
      selected.push_back(s);
    }
  }
  for (const std::string& s : options.sections) {
    if (std::find(AllSections().begin(), AllSections().end(), s) == AllSections().end()) {
      selected.push_back(s);  // reported as an unknown section (fail)
    }
  }
  absl::StatusOr<std::unique_ptr<c::Adapter>> adapter =
      options.builtin_kind.empty()
          ? c::LoadManifestAdapter(options.manifest_text, options.manifest_path)
          : c::LoadBuiltinAdapter(options.builtin_kind);
  if (!adapter.ok()) {
    report.adapter_kind = options.builtin_kind;
    for (const std::string& s : selected) {
      report.sections.push_back(
          {s, kFail,
           "the subject's declaration is invalid: " + std::string(adapter.status().message()), ""});
    }
    return report;
  }
  report.adapter_kind = (*adapter)->Declaration().kind;
  internal::Kit kit(options, (*adapter)->Declaration());
  for (const std::string& s : selected) {
    report.sections.push_back(kit.Run(s));
  }
  return report;
}

std::string ReportJson(const Report& report) {
  c::JsonWriter json;
  json.BeginObject();
  json.Key("schema_version").Int(1);
  json.Key("adapter_kind").String(report.adapter_kind);
  json.Key("contract_version").String(c::kContractVersion);
  json.Key("sections").BeginArray();
  for (const SectionResult& s : report.sections) {
    json.BeginObject().Key("section").String(s.section).Key("result").BeginObject();
    json.Key("status").String(s.status);
    if (s.status != kPass) {
      json.Key("reason").String(s.reason);
    }
    json.EndObject().EndObject();
  }
  json.EndArray();
  json.Key("honor_system").BeginArray();
  for (const char* duty : {"env_var_render", "self_update_pinning", "config_layer_disclosure"}) {
    json.BeginObject().Key("duty").String(duty).Key("status").String("unverified").EndObject();
  }
  json.EndArray();
  json.EndObject();
  return json.Take();
}

bool Conformant(const Report& report) {
  for (const SectionResult& s : report.sections) {
    if (s.status == kFail) {
      return false;
    }
  }
  return true;
}

}  // namespace ktesio::tck
