#include "ktesio/contract/adapter.h"

#include <utility>

#include "ktesio/contract/error.h"
#include "ktesio/contract/manifest.h"
#include "ktesio/contract/text.h"
#include "ktesio/contract/validation.h"

namespace ktesio::contract {

using text::Cat;
using text::Escape;
using text::Join;
namespace {

class DeclaredAdapter final : public Adapter {
 public:
  DeclaredAdapter(AdapterDeclaration declaration, bool builtin)
      : declaration_(std::move(declaration)), builtin_(builtin) {}
  const AdapterDeclaration& Declaration() const override { return declaration_; }
  bool IsBuiltin() const override { return builtin_; }

 private:
  const AdapterDeclaration declaration_;
  const bool builtin_;
};

ConfigTarget EnvTarget(std::string variable) {
  ConfigTarget target;
  target.kind = ConfigTarget::Kind::kEnv;
  target.env = std::move(variable);
  return target;
}

// Hermes Agent, run as a supervised gateway. HERMES_HOME is Hermes' documented isolation lever;
// HERMES_MODEL for the unified `model` key is Ktesio's convention for this builtin.
AdapterDeclaration HermesDeclaration() {
  AdapterDeclaration d;
  d.kind = "hermes";
  d.display_name = "Hermes Agent";
  d.start.exec = "hermes";
  d.start.args = {"gateway", "run", "--external-supervisor"};
  for (Os os : kAllOses) {
    d.capabilities.Set(Capability::kPause, os, SupportLevel::kBestEffort);
    d.capabilities.Set(Capability::kInteraction, os, SupportLevel::kGuaranteed);
  }
  d.metering = MeteringSource::kSelfReported;
  d.channel = InteractionChannel::kStdio;
  d.config.emplace("memory.dir", EnvTarget("HERMES_HOME"));
  d.config.emplace("model", EnvTarget("HERMES_MODEL"));
  return d;
}

// The test adapter around the project's fixture agent, ktesio-probe.
AdapterDeclaration MockDeclaration() {
  AdapterDeclaration d;
  d.kind = "mock";
  d.display_name = "Mock (ktesio-probe)";
  d.start.exec = "ktesio-probe";
  d.start.args = {"--heartbeat-ms", "1000"};
  d.capabilities.Set(Capability::kPause, Os::kLinux, SupportLevel::kGuaranteed);
  d.capabilities.Set(Capability::kPause, Os::kMacos, SupportLevel::kGuaranteed);
  d.capabilities.Set(Capability::kPause, Os::kWindows, SupportLevel::kBestEffort);
  for (Os os : kAllOses) {
    d.capabilities.Set(Capability::kInteraction, os, SupportLevel::kGuaranteed);
  }
  d.metering = MeteringSource::kSelfReported;
  d.channel = InteractionChannel::kStdio;
  d.config.emplace("model", EnvTarget("MOCK_MODEL"));
  d.config.emplace("memory.dir", EnvTarget("KTESIO_MEMORY_DIR"));
  return d;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Adapter>> LoadManifestAdapter(std::string_view toml_text,
                                                             std::string_view source_name) {
  absl::StatusOr<AdapterDeclaration> declaration = ParseManifest(toml_text, source_name);
  if (!declaration.ok()) {
    return declaration.status();
  }
  return std::make_unique<DeclaredAdapter>(*std::move(declaration), /*builtin=*/false);
}

absl::StatusOr<std::unique_ptr<Adapter>> LoadBuiltinAdapter(std::string_view kind) {
  AdapterDeclaration declaration;
  if (kind == "hermes") {
    declaration = HermesDeclaration();
  } else if (kind == "mock") {
    declaration = MockDeclaration();
  } else {
    return MakeError(absl::StatusCode::kInvalidArgument, reason::kUnknownKind,
                     Cat("unknown adapter kind '", Escape(kind),
                         "' (builtin kinds: ", Join(BuiltinKinds(), ", "),
                         "; for any other agent register an adapter.toml manifest)"));
  }
  // A builtin that breaks the contract's own rules is a programming error; surface it rather
  // than hand the engine an invalid declaration.
  if (absl::Status status = ValidateDeclaration(declaration); !status.ok()) {
    return MakeError(absl::StatusCode::kInternal, reason::kInternal,
                     Cat("builtin '", kind, "' is invalid: ", status.message()));
  }
  return std::make_unique<DeclaredAdapter>(std::move(declaration), /*builtin=*/true);
}

std::vector<std::string> BuiltinKinds() { return {"hermes", "mock"}; }

}  // namespace ktesio::contract
