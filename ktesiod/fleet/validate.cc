#include "fleet/validate.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "config/keys.h"
#include "fleet/apply.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/labels.h"
#include "ktesio/contract/text.h"
#include "paths/paths.h"
#include "registry/registry.h"

namespace ktesio::daemon::fleet {
namespace {

std::string Where(const v1::SourceLocation& location) {
  return absl::StrCat(location.file().empty() ? "<request>" : location.file(), ":",
                      location.line());
}

class Problems {
 public:
  void Add(const v1::SourceLocation& at, const std::string& subject, absl::string_view message) {
    // One line each: a quoted name may hold a newline or an escape sequence.
    lines_.push_back(contract::text::EscapeControls(
        absl::StrCat(Where(at), ": ", subject, subject.empty() ? "" : ": ", message)));
  }
  bool empty() const { return lines_.empty(); }
  absl::Status ToStatus() const {
    return contract::MakeError(
        absl::StatusCode::kInvalidArgument, contract::reason::kFleetInvalid,
        absl::StrCat("the fleet was not applied (nothing changed): ", lines_.size(),
                     lines_.size() == 1 ? " problem\n" : " problems\n",
                     absl::StrJoin(lines_, "\n")));
  }

 private:
  std::vector<std::string> lines_;
};

void ValidateLabels(const v1::FleetInstanceSpec& spec, const std::string& subject,
                    Problems& problems) {
  for (const auto& [key, value] : spec.labels()) {
    if (absl::Status s = engine::CheckOperatorLabel(key); !s.ok()) {
      problems.Add(spec.location(), subject, s.message());
    } else if (absl::Status v = contract::ValidateLabelValue(key, value); !v.ok()) {
      problems.Add(spec.location(), subject, v.message());
    }
  }
}

void ValidateConfig(const v1::FleetInstanceSpec& spec, const std::string& subject, Desired* desired,
                    Problems& problems) {
  for (const v1::ConfigSetting& setting : spec.config()) {
    const v1::SourceLocation& at = setting.has_location() ? setting.location() : spec.location();
    if (desired->config.count(setting.key()) != 0) {
      problems.Add(at, subject, absl::StrCat("config '", setting.key(), "' is given twice"));
      continue;
    }
    if (LooksLikeCredential(setting.key(), setting.value())) {
      problems.Add(at, subject,
                   absl::StrCat("config '", setting.key(),
                                "' holds a literal credential: store it with `ktctl secret set "
                                "NAME` and write \"secret:NAME\" (the value was not stored)"));
      continue;
    }
    absl::StatusOr<std::string> normalized =
        config::ValidateValue(setting.key(), setting.value(), config::Writer::kOperator);
    if (!normalized.ok()) {
      problems.Add(at, subject, normalized.status().message());
      continue;
    }
    desired->config[setting.key()] = *normalized;
    desired->config_locations[setting.key()] = at;
  }
}

void ValidateInstance(const v1::FleetInstanceSpec& spec, const std::string& fleet,
                      std::vector<Desired>* out, Problems& problems) {
  const std::string subject = absl::StrCat("agents.", spec.name());
  if (absl::Status s = ValidateInstanceName(spec.name()); !s.ok()) {
    problems.Add(spec.location(), subject, s.message());
  }
  Desired desired;
  desired.spec = &spec;
  desired.fleet = fleet;
  v1::RegisterAgentRequest preview;
  preview.set_name(spec.name());
  if (spec.has_manifest()) {
    *preview.mutable_manifest() = spec.manifest();
  } else if (spec.source_case() == v1::FleetInstanceSpec::kBuiltinKind) {
    preview.set_builtin_kind(spec.builtin_kind());
  }
  if (spec.source_case() == v1::FleetInstanceSpec::SOURCE_NOT_SET) {
    problems.Add(spec.location(), subject, "give a manifest or a builtin kind");
  } else if (absl::StatusOr<v1::AdapterSnapshot> adapter = registry::PreviewSnapshot(preview);
             !adapter.ok()) {
    problems.Add(spec.location(), subject, adapter.status().message());
  } else {
    desired.adapter = std::move(*adapter);
  }
  if (!v1::DesiredState_IsValid(spec.state())) {
    problems.Add(spec.location(), subject, "state must be running, stopped or unset");
  }
  ValidateLabels(spec, subject, problems);
  ValidateConfig(spec, subject, &desired, problems);
  out->push_back(std::move(desired));
}

}  // namespace

absl::Status Validate(const v1::ApplyFleetRequest& request, std::vector<Desired>* desired) {
  Problems problems;
  std::map<std::string, const v1::FleetInstanceSpec*> seen;
  if (request.fleets_size() == 0) {
    problems.Add({}, "", "no fleet given");
  }
  for (const v1::FleetSpec& fleet : request.fleets()) {
    if (fleet.name().empty()) {
      problems.Add(fleet.location(), "fleet", "name is missing");
    } else if (absl::Status s = contract::ValidateLabelValue(contract::kFleetLabel, fleet.name());
               !s.ok()) {
      problems.Add(fleet.location(), "fleet.name", s.message());
    }
    for (const v1::FleetInstanceSpec& spec : fleet.instances()) {
      const auto [it, fresh] = seen.emplace(spec.name(), &spec);
      if (!fresh) {
        problems.Add(spec.location(), absl::StrCat("agents.", spec.name()),
                     absl::StrCat("declared twice (also at ", Where(it->second->location()), ")"));
        continue;
      }
      ValidateInstance(spec, fleet.name(), desired, problems);
    }
  }
  return problems.empty() ? absl::OkStatus() : problems.ToStatus();
}

absl::Status CheckLimit(const std::vector<Step>& plan, size_t current, uint64_t max_instances) {
  size_t creates = 0;
  size_t prunes = 0;
  for (const Step& step : plan) {
    creates += step.Has(v1::PLAN_ACTION_CREATE) ? 1 : 0;
    prunes += step.Has(v1::PLAN_ACTION_PRUNE) ? 1 : 0;
  }
  const size_t after = current + creates - std::min(prunes, current + creates);
  if (creates > 0 && after > max_instances) {
    return contract::MakeError(
        absl::StatusCode::kInvalidArgument, contract::reason::kFleetInvalid,
        absl::StrCat("the fleet was not applied (nothing changed): it would create ", creates,
                     " instances, ", after, " in all, beyond max_instances = ", max_instances,
                     " (ktesiod.toml)"));
  }
  return absl::OkStatus();
}

bool LooksLikeCredential(std::string_view key, std::string_view raw) {
  // A reference only as the config layer reads one (untrimmed): " secret:x " is a literal.
  if (raw.starts_with(config::kSecretPrefix) || raw.starts_with("{env:")) {
    return false;
  }
  // The heuristics judge it as an agent would read it: surrounding blanks do not hide a key.
  const std::string_view value =
      contract::text::ToStd(absl::StripAsciiWhitespace(contract::text::ToAbsl(raw)));
  if (value.empty()) {
    return false;
  }
  const config::KeySpec* spec = config::FindKey(key);
  const bool secret_capable = config::IsPassThroughKey(key) || (spec && spec->allows_secret);
  if (!secret_capable) {
    return false;
  }
  if (config::IsPassThroughKey(key)) {
    const std::string upper = absl::AsciiStrToUpper(std::string(key.substr(6)));
    for (const char* word : {"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"}) {
      if (upper.find(word) != std::string::npos) {
        return true;
      }
    }
  }
  for (const char* prefix : {"sk-", "sk_live_", "ghp_", "gho_", "ghs_", "github_pat_", "xoxb-",
                             "xoxp-", "AKIA", "AIza", "glpat-"}) {
    if (value.size() >= 16 && absl::StartsWithIgnoreCase(contract::text::ToAbsl(value), prefix)) {
      return true;
    }
  }
  // A long token mixing upper case, lower case and digits with nothing else is a key, not a
  // model name or a URL.
  bool upper = false;
  bool lower = false;
  bool digit = false;
  for (char c : value) {
    upper = upper || absl::ascii_isupper(static_cast<unsigned char>(c));
    lower = lower || absl::ascii_islower(static_cast<unsigned char>(c));
    digit = digit || absl::ascii_isdigit(static_cast<unsigned char>(c));
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') {
      return false;
    }
  }
  return value.size() >= 40 && upper && lower && digit;
}

}  // namespace ktesio::daemon::fleet
