#pragma once

// Start-time delivery (product.md §6): turns the effective configuration into what the child
// receives through the adapter's [config] mapping, and refuses the start before launch when it
// cannot be delivered honestly. Pure apart from the injected secret resolver.
//
// What is delivered: every effective key the adapter maps ([config.KEY]) — engine-only keys
// (restart.*, logs.*, autostart, budget.*, cost.*) and the reserved keys included when mapped —
// plus agent.<TAIL> pass-through as the environment variable TAIL, verbatim. Unmapped keys are
// silent no-ops, except memory.dir (a notice: the managed memory dir is not delivered).
//
// Secrets: a `secret:NAME` value is resolved here and only here; the cleartext appears only in
// DeliveryPlan::env, argv_tail and files (the native targets), never in notices, errors or the
// snapshot.
//
// {env:VAR} honesty (contract v1 rider): every delivered value containing {env:VAR} requires VAR
// to be set, and non-empty, in the child's final environment (base env + start template env +
// delivered env); otherwise the start is refused naming VAR and the key. An empty variable
// counts as unset because it renders exactly the silently-empty config the rider forbids.

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "config/layers.h"
#include "config/secrets.h"
#include "ktesio/contract/declaration.h"

namespace ktesio::daemon::config {

struct Notice {
  enum class Level { kInfo, kWarning };
  Level level = Level::kInfo;
  std::string key;      // the unified key concerned
  std::string message;  // never holds a secret's cleartext
  bool operator==(const Notice&) const = default;
};

// Resolves a secret NAME to its cleartext. Errors: FAILED_PRECONDITION/DELIVERY_FAILED (or the
// store's own errors) — see SecretsStore::Resolve.
using SecretResolver = std::function<absl::StatusOr<std::string>(std::string_view name)>;

// A resolver reading `store` then `environment`. `store` must outlive the resolver.
SecretResolver StoreResolver(const SecretsStore& store, EnvLookup environment);

struct DeliveryInput {
  std::map<std::string, contract::ConfigTarget> mapping;  // the adapter's declaration.config
  std::map<std::string, std::string> template_env;        // the start template's env
  std::vector<std::string> template_args;                 // the start template's args
  std::map<std::string, std::string> base_env;            // the child's safe base environment
  std::vector<Entry> effective;                           // Effective(layers)
  // Current content of `file` targets that already exist, by relative path: such a file is
  // merged into (its other keys kept; MergeIntoTomlDocument), an absent one rendered fresh.
  // Merging never deletes: a native key delivered by an earlier start stays when its unified key
  // is later unset. Read them with ReadExistingTargets (delivery_files.h).
  std::map<std::string, std::string> existing_files;
};

// Builds the input from a declaration's mapping and start template.
DeliveryInput InputFor(const contract::AdapterDeclaration& declaration,
                       std::vector<Entry> effective, std::map<std::string, std::string> base_env);

struct DeliveryPlan {
  // Variables to add on top of base + template env (they win over both).
  std::map<std::string, std::string> env;
  // Appended to the start args: (flag, value) per `flag` target, in unified-key order.
  std::vector<std::string> argv_tail;
  // Relative path inside the home -> complete TOML document to write there.
  std::map<std::string, std::string> files;
  std::vector<Notice> notices;
  // effective-config.json: EntriesJson(Masked(effective)).
  std::string effective_config_json;
};

// The relative paths of the `file` targets this input will write (to read before planning).
std::vector<std::string> FileTargetPaths(const DeliveryInput& input);

// Plans the delivery. Notices: memory.dir unmapped (info); a delivered env variable that
// overrides a start-template variable (info); an agent.* key not delivered because a mapped key
// targets the same variable, or its tail is not an env name (warning); a secret delivered through
// a `flag` target (warning: argv is visible to other local users).
// Errors (the start must be refused, nothing launched or written):
//   FAILED_PRECONDITION/DELIVERY_FAILED: an unresolvable secret (naming NAME and the resolvers
//     tried), an unset {env:VAR} ("config key 'model' references {env:OPENAI_KEY}, which is not
//     set in the agent's environment"), or a file target that cannot be rendered or merged;
//   the resolver's other errors (e.g. PERMISSION_DENIED for a refused secrets file).
absl::StatusOr<DeliveryPlan> PlanDelivery(const DeliveryInput& input,
                                          const SecretResolver& resolve_secret);

}  // namespace ktesio::daemon::config
