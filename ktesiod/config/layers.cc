#include "config/layers.h"

#include "config/errors.h"
#include "config/keys.h"
#include "ktesio/contract/json_writer.h"

namespace ktesio::daemon::config {

using internal::Cat;

std::string_view SourceName(Source source) {
  switch (source) {
    case Source::kEngineDefault:
      return "engine-default";
    case Source::kKindDefault:
      return "kind-default";
    case Source::kInstance:
      return "instance";
    case Source::kInvocationOverride:
      return "invocation-override";
  }
  return "engine-default";
}

absl::Status ValidateLayer(Source source, const std::map<std::string, std::string>& layer) {
  const Writer writer = source == Source::kInvocationOverride ? Writer::kEngine : Writer::kOperator;
  for (const auto& [key, value] : layer) {
    absl::StatusOr<std::string> normalized = ValidateValue(key, value, writer);
    if (!normalized.ok()) {
      return internal::Error(
          normalized.status().code(), contract::ErrorReason(normalized.status()),
          Cat(SourceName(source), " layer: ", std::string(normalized.status().message())));
    }
    if (*normalized != value) {
      return internal::ConfigInvalid(Cat(SourceName(source), " layer: value of '", key,
                                         "' is not in normalized form (expected '", *normalized,
                                         "')"));
    }
  }
  return absl::OkStatus();
}

std::vector<Entry> Effective(const Layers& layers) {
  std::map<std::string, Entry> merged;
  auto apply = [&merged](Source source, std::string_view key, std::string_view value) {
    Entry& entry = merged[std::string(key)];
    entry.key = std::string(key);
    entry.value = std::string(value);
    entry.source = std::string(SourceName(source));
    entry.unvalidated = IsPassThroughKey(key);
    entry.secret_ref = SecretRefName(value).has_value();
  };
  for (const KeySpec& spec : KnownKeys()) {
    if (spec.has_default) {
      apply(Source::kEngineDefault, spec.key, spec.engine_default);
    }
  }
  const std::pair<Source, const std::map<std::string, std::string>*> ordered[] = {
      {Source::kKindDefault, &layers.kind_default},
      {Source::kInstance, &layers.instance},
      {Source::kInvocationOverride, &layers.invocation_override},
  };
  for (const auto& [source, layer] : ordered) {
    for (const auto& [key, value] : *layer) {
      apply(source, key, value);
    }
  }
  std::vector<Entry> entries;
  entries.reserve(merged.size());
  for (auto& [key, entry] : merged) {
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::optional<std::string> Lookup(const std::vector<Entry>& entries, std::string_view key) {
  for (const Entry& entry : entries) {
    if (entry.key == key) {
      return entry.value;
    }
  }
  return std::nullopt;
}

std::vector<Entry> Masked(std::vector<Entry> entries) {
  for (Entry& entry : entries) {
    if (entry.secret_ref || entry.value.starts_with(kSecretPrefix)) {
      entry.value = "secret:****";
    }
  }
  return entries;
}

std::string EntriesJson(const std::vector<Entry>& entries) {
  contract::JsonWriter json;
  json.BeginObject().Key("schema_version").Int(1).Key("entries").BeginArray();
  for (const Entry& entry : entries) {
    json.BeginObject().Key("key").String(entry.key).Key("value");
    switch (JsonKindOf(entry.key, entry.value)) {
      case TomlKind::kInteger:
        json.Raw(entry.value);  // decimal digits only (JsonKindOf)
        break;
      case TomlKind::kBoolean:
        json.Bool(entry.value == "true");
        break;
      case TomlKind::kString:
        json.String(entry.value);
        break;
    }
    json.Key("source").String(entry.source).Key("unvalidated").Bool(entry.unvalidated).EndObject();
  }
  json.EndArray().EndObject();
  return json.Take();
}

}  // namespace ktesio::daemon::config
