#pragma once

// Many instances in one command: several NAMEs, --selector/-l SEL, or --all on the lifecycle
// verbs (AgentService.BatchAgents, run concurrently by the daemon) and on the reading verbs
// (resolved through ListAgents). One NAME alone keeps the single-instance behaviour and output.

#include <optional>
#include <string>
#include <vector>

#include "cli/app.h"
#include "cli/args.h"

namespace ktesio::cli {

struct Targets {
  std::vector<std::string> names;
  std::string selector;
  bool all = false;
  // One NAME and nothing else: the single-instance command.
  bool Single() const { return names.size() == 1 && selector.empty() && !all; }
};

// The selection flags every per-instance verb accepts, for ParseLocal.
inline const std::set<std::string> kSelectValueFlags = {"--selector", "-l"};
inline const std::set<std::string> kSelectSwitchFlags = {"--all"};

// Reads names and selection flags. Errors (a message for ctx.Usage): nothing selected, or
// --all combined with names or a selector.
absl::StatusOr<Targets> TargetsFrom(const LocalArgs& local);

// The lifecycle verb on many instances: one line per instance (JSON: an array of per-instance
// results); exit code the worst of the instances' (docs/exit-codes.md).
struct BatchOptions {
  std::optional<uint32_t> timeout_seconds;
  bool delete_home = false;
  bool force = false;
};
int RunBatch(Context& ctx, v1::BatchVerb verb, const Targets& targets, const BatchOptions& options);

// The instance names the targets denote (sorted), for the reading verbs. On failure reports and
// sets `exit_code`, returning nullopt.
std::optional<std::vector<std::string>> ResolveNames(Context& ctx, Client& client,
                                                     const Targets& targets, int* exit_code);

}  // namespace ktesio::cli
