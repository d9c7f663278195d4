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

// --selector SEL (-l SEL): a label selector (docs/fleet-file.md#labels-and-selectors).
inline constexpr Arg kSelectorArg{.name = "--selector",
                                  .value = "SEL",
                                  .help = "the instances whose labels match SEL (k=v,k!=v,...)",
                                  .alias = "-l",
                                  .join = ","};

// The selection every per-instance verb accepts, "(NAME... | --selector SEL | --all)" (names and
// a selector combine; --all stands alone), followed by the verb's own `more` arguments.
std::vector<Arg> TargetArgs(Arg::Need need, std::vector<Arg> more = {});

// The names and selection flags that ParseArgs accepted against TargetArgs.
Targets TargetsFrom(const LocalArgs& local);

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
