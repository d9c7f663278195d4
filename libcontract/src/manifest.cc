#include "ktesio/contract/manifest.h"

#include <algorithm>
#include <optional>
#include <string>

#include "ktesio/contract/error.h"
#include "ktesio/contract/semver.h"
#include "ktesio/contract/status_macros.h"
#include "ktesio/contract/text.h"
#include "ktesio/contract/toml_depth.h"
#include "ktesio/contract/validation.h"
#include "manifest_context.h"

namespace ktesio::contract {

using text::Cat;
using text::ToStd;

namespace {

using internal::ManifestContext;

// The kind and display name end up in tables, JSON and logs: bounded, and no control characters
// (a terminal escape in a kind would reach every `agent list`).
constexpr size_t kMaxKindBytes = 128;
constexpr size_t kMaxDisplayNameBytes = 256;

std::string_view DisplayTextProblem(std::string_view text, size_t max_bytes) {
  if (text.size() > max_bytes) {
    return max_bytes == kMaxKindBytes ? "is longer than 128 bytes" : "is longer than 256 bytes";
  }
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return "holds a control character";
    }
  }
  return "";
}
using internal::ParseOp;
using internal::RequiredString;

// A mandatory top-level section: present, a table, not empty.
absl::StatusOr<const toml::table*> MandatorySection(const ManifestContext& context,
                                                    const toml::table& root,
                                                    std::string_view name) {
  const std::string where = Cat("[", name, "]");
  const toml::node* node = root.get(name);
  if (node == nullptr) {
    return context.Error(Cat("missing mandatory section ", where));
  }
  absl::StatusOr<const toml::table*> table = context.Table(*node, where);
  if (table.ok() && (*table)->empty()) {
    return context.Error(node->source(), Cat("mandatory section ", where, " is empty"));
  }
  return table;
}

// A value of a closed enum: `parse` produces the "expected one of" message.
template <typename T, typename ParseFn>
absl::StatusOr<T> EnumValue(const ManifestContext& context, const toml::node& node,
                            std::string_view display, ParseFn parse) {
  KT_ASSIGN_OR_RETURN(std::string text, context.String(node, display));
  absl::StatusOr<T> value = parse(text);
  if (!value.ok()) {
    return context.Error(node.source(), Cat(display, ": ", value.status().message()));
  }
  return value;
}

absl::StatusOr<AdapterDeclaration> ParseAdapterSection(const ManifestContext& context,
                                                       const toml::table& root,
                                                       AdapterDeclaration declaration) {
  absl::StatusOr<const toml::table*> adapter = MandatorySection(context, root, "adapter");
  if (!adapter.ok()) {
    return adapter.status();
  }
  if (absl::Status s = context.CheckKeys(**adapter, "[adapter]", "", {"kind", "name"}); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> kind = RequiredString(context, **adapter, "kind", "[adapter]");
  if (!kind.ok()) {
    return kind.status();
  }
  if (std::string_view problem = DisplayTextProblem(*kind, kMaxKindBytes); !problem.empty()) {
    return context.Error((*adapter)->get("kind")->source(), Cat("'kind' in [adapter] ", problem));
  }
  declaration.kind = *std::move(kind);
  if (const toml::node* name = (*adapter)->get("name")) {
    absl::StatusOr<std::string> display_name = context.String(*name, "'name' in [adapter]");
    if (!display_name.ok()) {
      return display_name.status();
    }
    if (std::string_view problem = DisplayTextProblem(*display_name, kMaxDisplayNameBytes);
        !problem.empty()) {
      return context.Error(name->source(), Cat("'name' in [adapter] ", problem));
    }
    declaration.display_name = *std::move(display_name);
  }
  return declaration;
}

absl::StatusOr<const toml::table*> LifecycleTable(const ManifestContext& context,
                                                  const toml::table& root) {
  const toml::node* node = root.get("lifecycle");
  if (node == nullptr) {
    return context.Error("missing mandatory section [lifecycle.start]");
  }
  absl::StatusOr<const toml::table*> lifecycle = context.Table(*node, "[lifecycle]");
  if (!lifecycle.ok()) {
    return lifecycle.status();
  }
  if (absl::Status s = context.CheckKeys(**lifecycle, "[lifecycle]", "lifecycle op",
                                         {"start", "stop", "pause", "resume"});
      !s.ok()) {
    return s;
  }
  if ((*lifecycle)->get("start") == nullptr) {
    return context.Error(node->source(), "missing mandatory section [lifecycle.start]");
  }
  return lifecycle;
}

absl::StatusOr<CapabilityDeclaration> ParseCapabilities(const ManifestContext& context,
                                                        const toml::table& root) {
  KT_ASSIGN_OR_RETURN(const toml::table* section, MandatorySection(context, root, "capabilities"));
  if (absl::Status s =
          context.CheckKeys(*section, "[capabilities]", "capability", {"pause", "interaction"});
      !s.ok()) {
    return s;
  }
  CapabilityDeclaration capabilities;
  for (Capability capability : kAllCapabilities) {
    const toml::node* node = (section)->get(CapabilityName(capability));
    if (node == nullptr) {
      continue;
    }
    const std::string where = Cat("[capabilities.", CapabilityName(capability), "]");
    KT_ASSIGN_OR_RETURN(const toml::table* per_os, context.Table(*node, where));
    if (absl::Status s = context.CheckKeys(*per_os, where, "OS", {"linux", "macos", "windows"});
        !s.ok()) {
      return s;
    }
    for (Os os : kAllOses) {
      if (const toml::node* level_node = (per_os)->get(OsName(os))) {
        KT_ASSIGN_OR_RETURN(
            SupportLevel level,
            EnumValue<SupportLevel>(context, *level_node, Cat("'", OsName(os), "' in ", where),
                                    ParseSupportLevel));
        capabilities.Set(capability, os, level);
      }
    }
  }
  if (!capabilities.IsViable()) {
    return context.Error(
        (section)->source(),
        "capability declaration in [capabilities] is not viable: every capability is unsupported "
        "(or has no entry) on every OS; declare at least one capability guaranteed or "
        "best-effort somewhere");
  }
  return capabilities;
}

absl::StatusOr<MeteringSource> ParseMetering(const ManifestContext& context,
                                             const toml::table& root) {
  KT_ASSIGN_OR_RETURN(const toml::table* section, MandatorySection(context, root, "metering"));
  if (absl::Status s = context.CheckKeys(*section, "[metering]", "", {"source"}); !s.ok()) {
    return s;
  }
  return EnumValue<MeteringSource>(context, *(section)->get("source"), "'source' in [metering]",
                                   ParseMeteringSource);
}

absl::StatusOr<InteractionChannel> ParseInteraction(const ManifestContext& context,
                                                    const toml::table& root) {
  const toml::node* node = root.get("interaction");
  if (node == nullptr) {
    return InteractionChannel::kStdio;
  }
  KT_ASSIGN_OR_RETURN(const toml::table* section, context.Table(*node, "[interaction]"));
  if (absl::Status s = context.CheckKeys(*section, "[interaction]", "", {"channel"}); !s.ok()) {
    return s;
  }
  const toml::node* channel = (section)->get("channel");
  if (channel == nullptr) {
    return InteractionChannel::kStdio;
  }
  return EnumValue<InteractionChannel>(context, *channel, "'channel' in [interaction]",
                                       ParseInteractionChannel);
}

// contract_version comes first: a foreign-major manifest may use sections this engine does not
// know, and the operator must hear about the version, not about an unknown key.
absl::StatusOr<std::string> ParseContractVersion(const ManifestContext& context,
                                                 const toml::table& root) {
  const toml::node* node = root.get("contract_version");
  if (node == nullptr) {
    return context.Error(Cat("missing mandatory key 'contract_version' (e.g. contract_version = \"",
                             kContractVersion, "\")"));
  }
  absl::StatusOr<std::string> version = context.String(*node, "contract_version");
  if (!version.ok()) {
    return version.status();
  }
  if (absl::Status s = NegotiateContractVersion(*version); !s.ok()) {
    if (ErrorReason(s) == reason::kContractIncompatible) {
      return s;
    }
    return context.Error(node->source(), ToStd(s.message()));
  }
  return version;
}

absl::StatusOr<AdapterDeclaration> ParseOptionalSections(const ManifestContext& context,
                                                         const toml::table& root,
                                                         const toml::table& lifecycle,
                                                         AdapterDeclaration declaration) {
  const std::pair<std::string_view, std::optional<OpTemplate>*> ops[] = {
      {"stop", &declaration.stop},
      {"pause", &declaration.pause},
      {"resume", &declaration.resume},
  };
  for (const auto& [name, slot] : ops) {
    if (const toml::node* node = lifecycle.get(name)) {
      absl::StatusOr<OpTemplate> op = ParseOp(context, *node, name);
      if (!op.ok()) {
        return op.status();
      }
      *slot = *std::move(op);
    }
  }
  absl::StatusOr<InteractionChannel> channel = ParseInteraction(context, root);
  if (!channel.ok()) {
    return channel.status();
  }
  declaration.channel = *channel;
  if (const toml::node* config = root.get("config")) {
    absl::StatusOr<std::map<std::string, ConfigTarget>> mapping =
        internal::ParseConfigSection(context, *config);
    if (!mapping.ok()) {
      return mapping.status();
    }
    declaration.config = *std::move(mapping);
  }
  if (absl::Status s = ValidateDeclaration(declaration); !s.ok()) {
    return context.Error(ToStd(s.message()));
  }
  return declaration;
}

absl::StatusOr<AdapterDeclaration> ParseDocument(const ManifestContext& context,
                                                 const toml::table& root) {
  AdapterDeclaration declaration;
  absl::StatusOr<std::string> version = ParseContractVersion(context, root);
  if (!version.ok()) {
    return version.status();
  }
  declaration.contract_version = *std::move(version);
  if (absl::Status s = context.CheckKeys(root, "at top level", "",
                                         {"contract_version", "adapter", "lifecycle",
                                          "capabilities", "metering", "interaction", "config"});
      !s.ok()) {
    return s;
  }
  absl::StatusOr<AdapterDeclaration> with_adapter =
      ParseAdapterSection(context, root, std::move(declaration));
  if (!with_adapter.ok()) {
    return with_adapter.status();
  }
  declaration = *std::move(with_adapter);
  KT_ASSIGN_OR_RETURN(const toml::table* lifecycle, LifecycleTable(context, root));
  absl::StatusOr<OpTemplate> start = ParseOp(context, *(lifecycle)->get("start"), "start");
  if (!start.ok()) {
    return start.status();
  }
  declaration.start = *std::move(start);
  absl::StatusOr<CapabilityDeclaration> capabilities = ParseCapabilities(context, root);
  if (!capabilities.ok()) {
    return capabilities.status();
  }
  declaration.capabilities = *std::move(capabilities);
  absl::StatusOr<MeteringSource> metering = ParseMetering(context, root);
  if (!metering.ok()) {
    return metering.status();
  }
  declaration.metering = *metering;
  return ParseOptionalSections(context, root, *lifecycle, std::move(declaration));
}

}  // namespace

absl::StatusOr<AdapterDeclaration> ParseManifest(std::string_view toml_text,
                                                 std::string_view source_name) {
  const ManifestContext context(source_name);
  if (std::optional<TomlTooDeep> deep = FindTooDeepNesting(toml_text)) {
    return context.Error(Cat("line ", deep->line, ": ", deep->message));
  }
  toml::parse_result parsed = toml::parse(toml_text, source_name);
  if (!parsed) {
    const toml::parse_error& error = parsed.error();
    return context.Error(error.source(), Cat("TOML syntax error: ", error.description()));
  }
  return ParseDocument(context, parsed.table());
}

}  // namespace ktesio::contract
