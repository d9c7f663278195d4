// Section config_mapping, and the delivery observation (/proc environ and cmdline, files in the
// Agent Home) that memory and metering_engine_observed reuse.

#include <unistd.h>

#include <atomic>
#include <map>

#include "kit_internal.h"
#include "ktesio/contract/status_macros.h"
#include "process_tree.h"

namespace ktesio::tck::internal {
namespace {

// True when the NUL-separated `environ` holds the entry `want` ("NAME=value").
bool EnvHas(const std::string& environ, const std::string& want) {
  std::string entry;
  for (char ch : environ + '\0') {
    if (ch == '\0') {
      if (entry == want) {
        return true;
      }
      entry.clear();
    } else {
      entry += ch;
    }
  }
  return false;
}

// `text` split at NULs; a trailing word without a NUL is dropped (as /proc/<pid>/cmdline and
// the argv wrapper's record always end in one).
std::vector<std::string> NulTerminatedWords(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  for (char ch : text) {
    if (ch == '\0') {
      words.push_back(word);
      word.clear();
    } else {
      word += ch;
    }
  }
  return words;
}

}  // namespace

// A value the daemon accepts for `key`, distinctive enough to find; nullopt = unknown.
std::optional<std::string> Kit::ValueFor(const std::string& key, int n) {
  const std::string tag = std::to_string(n);
  if (key == "model" || key.rfind("agent.", 0) == 0) {
    return "tck-" + tag;
  }
  if (key == "budget.tokens.per_run") {
    return "123450" + tag;
  }
  if (key == "budget.tokens.cumulative") {
    return "987650" + tag;
  }
  if (key == "restart.policy") {
    return "never";
  }
  if (key == "logs.keep") {
    return "7";
  }
  if (key == "logs.max_bytes") {
    return "654321";
  }
  if (key == "restart.backoff_initial_ms") {
    return "1234";
  }
  if (key == "restart.backoff_max_ms") {
    return "65432";
  }
  if (key == "restart.max_consecutive") {
    return "17";
  }
  if (key == "restart.reset_after_ms") {
    return "76543";
  }
  if (key == "budget.breach_action") {
    return "warn";
  }
  if (key == "autostart") {
    return "false";
  }
  return std::nullopt;
}

absl::StatusOr<Delivery> Kit::ReadDelivery(const v1::AgentInstance& instance) {
  Delivery out;
  const std::string proc = "/proc/" + std::to_string(instance.pid());
  out.environ = ReadFile(proc + "/environ");
  out.argv = NulTerminatedWords(ReadFile(proc + "/cmdline"));
  if (!argv_file_.empty()) {
    std::string recorded;
    deadline_->WaitFor(
        [&] {
          recorded = ReadFile(argv_file_);
          return !recorded.empty() || access(argv_file_.c_str(), F_OK) == 0;
        },
        milliseconds(5000));
    out.argv = NulTerminatedWords(recorded);
    unlink(argv_file_.c_str());
  }
  out.home = instance.agent_home();
  if (subject_mode()) {
    for (const ProcInfo& p : AgentProcesses(instance.pid())) {
      if (p.pid == instance.pid()) {
        out.agent = Name(p);
        continue;
      }
      std::string environ = ReadFile("/proc/" + std::to_string(p.pid) + "/environ");
      if (!environ.empty()) {
        out.others.push_back({Name(p), std::move(environ)});
      }
    }
  }
  if (out.environ.empty() && out.argv.empty()) {
    return absl::PermissionDeniedError("cannot read " + proc +
                                       "/environ and cmdline (the kit must run as the daemon's "
                                       "user on the daemon's host)");
  }
  return out;
}

// Empty when `value` reached `target`, else what went wrong.
std::string Kit::CheckDelivered(const Delivery& got, const std::string& key,
                                const c::ConfigTarget& target, const std::string& value) {
  switch (target.kind) {
    case c::ConfigTarget::Kind::kEnv: {
      const std::string want = target.env + "=" + value;
      if (!EnvHas(got.environ, want)) {
        return key + " -> env " + target.env + " not delivered" +
               (got.agent.empty() ? "" : " to the agent process " + got.agent) + " (expected " +
               want + ")";
      }
      for (const Delivery::Process& p : got.others) {
        if (!EnvHas(p.environ, want)) {
          return key + " -> env " + target.env + " reached the agent process but not " + p.name +
                 ", one of its processes: the subject's program dropped it on the way (expected " +
                 want + " in every process of the agent)";
        }
      }
      return "";
    }
    case c::ConfigTarget::Kind::kFlag:
      for (size_t i = 0; i + 1 < got.argv.size(); ++i) {
        if (got.argv[i] == target.flag && got.argv[i + 1] == value) {
          return "";
        }
      }
      return key + " -> flag " + target.flag + " " + value + " not adjacent in argv";
    case c::ConfigTarget::Kind::kFile: {
      const std::string path = got.home + "/" + target.file_path;
      std::string text = ReadFile(path);
      if (text.find(value) != std::string::npos) {
        return "";
      }
      return key + " -> file " + target.file_path + " (key " + target.file_key +
             ") does not carry '" + value + "'";
    }
  }
  return "unknown target";
}

absl::StatusOr<Kit::Outcome> Kit::ConfigMapping() {
  const std::string name = NewName("config_mapping");
  if (!subject_mode()) {
    UseArgvWrapperIfFlags(name);
  }
  KT_RETURN_IF_ERROR(RegisterAgent(name, {"--heartbeat-ms", "1000"}));
  static std::atomic<int> n{1000};
  std::map<std::string, std::string> values;
  std::vector<std::string> skipped;
  for (const auto& [key, target] : d_.config) {
    if (key == "memory.dir" || key == "metering.base_url") {
      continue;  // engine-reserved
    }
    std::optional<std::string> value = ValueFor(key, n.fetch_add(1));
    if (!value) {
      value = "tck-" + std::to_string(n.fetch_add(1));
      if (!SetConfig(name, key, *value).ok()) {
        skipped.push_back(key);
        continue;
      }
    } else {
      KT_RETURN_IF_ERROR(SetConfig(name, key, *value));
    }
    values[key] = *value;
  }
  KT_RETURN_IF_ERROR(SetConfig(name, "agent.KTESIO_TCK_PASSTHROUGH", "tck-pass"));
  KT_ASSIGN_OR_RETURN(const v1::AgentInstance running, StartRunning(name));
  KT_ASSIGN_OR_RETURN(const Delivery got, ReadDelivery(running));
  std::vector<std::string> problems;
  for (const auto& [key, value] : values) {
    // agent.* keys the adapter maps explicitly go to the mapping; unmapped ones pass through.
    std::string problem = CheckDelivered(got, key, d_.config.find(key)->second, value);
    if (!problem.empty()) {
      problems.push_back(problem);
    }
  }
  if (d_.config.count("agent.KTESIO_TCK_PASSTHROUGH") == 0) {
    c::ConfigTarget pass;
    pass.kind = c::ConfigTarget::Kind::kEnv;
    pass.env = "KTESIO_TCK_PASSTHROUGH";
    std::string problem = CheckDelivered(got, "agent.KTESIO_TCK_PASSTHROUGH", pass, "tck-pass");
    if (!problem.empty()) {
      problems.push_back(problem);
    }
  }
  // A mapped key the daemon refused the kit's value for was not delivered: the report says so
  // instead of passing it silently. (A manifest can map only documented keys, so this is the
  // kit's value missing a key's rule, not a key that can never deliver.)
  const std::string unexercised =
      skipped.empty() ? ""
                      : "not exercised: " + Join(skipped) + " (config set refused the kit's value)";
  if (problems.empty()) {
    return Outcome{kPass, unexercised};
  }
  if (!skipped.empty()) {
    problems.push_back(unexercised);
  }
  return Outcome{kFail, Join(problems)};
}

}  // namespace ktesio::tck::internal
