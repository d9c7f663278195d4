#include "config/delivery.h"

#include <set>
#include <utility>

#include "config/errors.h"
#include "config/keys.h"
#include "ktesio/contract/config_mapping.h"
#include "ktesio/contract/status_macros.h"
#include "ktesio/contract/validation.h"

namespace ktesio::daemon::config {

using contract::ConfigTarget;
using internal::Cat;

namespace {

// One value bound for a native target.
struct Delivered {
  std::string key;
  ConfigTarget target;
  std::string value;  // cleartext once resolved
  bool secret = false;
  bool pass_through = false;
  bool dropped = false;  // a pass-through key shadowed by a mapped key: not delivered
};

Notice MakeNotice(Notice::Level level, std::string_view key, std::string message) {
  Notice notice;
  notice.level = level;
  notice.key = std::string(key);
  notice.message = std::move(message);
  return notice;
}

// Chooses each effective entry's target (or a notice), resolving secrets.
absl::StatusOr<std::vector<Delivered>> Select(const DeliveryInput& input,
                                              const SecretResolver& resolve_secret,
                                              std::vector<Notice>& notices) {
  std::vector<Delivered> selected;
  for (const Entry& entry : input.effective) {
    Delivered item;
    item.key = entry.key;
    if (auto it = input.mapping.find(entry.key); it != input.mapping.end()) {
      item.target = it->second;
    } else if (IsPassThroughKey(entry.key)) {
      const std::string tail = entry.key.substr(kPassThroughPrefix.size());
      if (!contract::IsValidEnvVarName(tail)) {
        notices.push_back(MakeNotice(Notice::Level::kWarning, entry.key,
                                     Cat("'", entry.key, "' is not delivered: '", tail,
                                         "' is not a valid environment variable name")));
        continue;
      }
      item.target.kind = ConfigTarget::Kind::kEnv;
      item.target.env = tail;
      item.pass_through = true;
    } else {
      if (entry.key == "memory.dir") {
        notices.push_back(MakeNotice(
            Notice::Level::kInfo, entry.key,
            "memory.dir is not mapped by this adapter: the managed memory dir is not delivered "
            "to the agent (declared:false)"));
      }
      continue;
    }
    item.value = entry.value;
    if (std::optional<std::string_view> name = SecretRefName(entry.value); name.has_value()) {
      absl::StatusOr<std::string> cleartext = resolve_secret(*name);
      if (!cleartext.ok()) {
        return internal::Error(
            cleartext.status().code(), contract::ErrorReason(cleartext.status()),
            Cat("config key '", entry.key, "': ", std::string(cleartext.status().message())));
      }
      item.value = *std::move(cleartext);
      item.secret = true;
    }
    selected.push_back(std::move(item));
  }
  return selected;
}

// Env and argv: mapped env targets win over pass-through keys naming the same variable.
void PlaceEnvAndFlags(const DeliveryInput& input, std::vector<Delivered>& selected,
                      DeliveryPlan& plan) {
  std::map<std::string, std::string> mapped_owner;  // variable -> mapped key
  for (const Delivered& item : selected) {
    if (item.target.kind == ConfigTarget::Kind::kEnv && !item.pass_through) {
      mapped_owner[item.target.env] = item.key;
    }
  }
  for (Delivered& item : selected) {
    switch (item.target.kind) {
      case ConfigTarget::Kind::kEnv: {
        const std::string& variable = item.target.env;
        auto owner = mapped_owner.find(variable);
        if (item.pass_through && owner != mapped_owner.end()) {
          plan.notices.push_back(
              MakeNotice(Notice::Level::kWarning, item.key,
                         Cat("'", item.key, "' is not delivered: ", variable,
                             " is delivered by config key '", owner->second, "'")));
          item.dropped = true;
          continue;
        }
        plan.env[variable] = item.value;
        if (input.template_env.count(variable) > 0) {
          plan.notices.push_back(
              MakeNotice(Notice::Level::kInfo, item.key,
                         Cat("config key '", item.key, "' delivers ", variable,
                             ", which overrides the start template's ", variable)));
        }
        break;
      }
      case ConfigTarget::Kind::kFlag:
        plan.argv_tail.push_back(item.target.flag);
        plan.argv_tail.push_back(item.value);
        if (item.secret) {
          plan.notices.push_back(MakeNotice(
              Notice::Level::kWarning, item.key,
              Cat("config key '", item.key, "' delivers a secret through the flag ",
                  item.target.flag,
                  ": argv is visible to other local users; prefer an env or file target")));
        }
        break;
      case ConfigTarget::Kind::kFile:
        break;
    }
  }
}

absl::Status RenderFiles(const DeliveryInput& input, const std::vector<Delivered>& selected,
                         DeliveryPlan& plan) {
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> by_path;
  for (const Delivered& item : selected) {
    if (item.target.kind == ConfigTarget::Kind::kFile) {
      by_path[item.target.file_path].emplace_back(item.target.file_key, item.value);
    }
  }
  for (const auto& [path, values] : by_path) {
    auto existing = input.existing_files.find(path);
    absl::StatusOr<std::string> document =
        existing == input.existing_files.end()
            ? contract::RenderTomlDocument(values)
            : contract::MergeIntoTomlDocument(existing->second, values);
    if (!document.ok()) {
      return internal::DeliveryFailed(
          Cat("file target '", path, "': ", std::string(document.status().message())));
    }
    plan.files[path] = *std::move(document);
  }
  return absl::OkStatus();
}

// {env:VAR} honesty: every placeholder of every delivered value names a non-empty variable of
// the child's final environment.
absl::Status CheckEnvPlaceholders(const DeliveryInput& input,
                                  const std::vector<Delivered>& selected,
                                  const DeliveryPlan& plan) {
  auto is_set = [&](const std::string& name) {
    for (const auto* env : {&plan.env, &input.template_env, &input.base_env}) {
      if (auto it = env->find(name); it != env->end()) {
        return !it->second.empty();
      }
    }
    return false;
  };
  // `what` names the value for the message: "config key 'model'", "the start template's env X".
  auto check = [&](const std::string& what, const std::string& value) -> absl::Status {
    for (const std::string& variable : contract::FindEnvPlaceholders(value)) {
      if (!contract::IsValidEnvVarName(variable)) {
        // No environment can hold it, so no remedy but editing the value.
        return internal::DeliveryFailed(
            Cat(what, " references {env:", internal::Escape(variable),
                "}, which is not a valid environment variable name (letters, digits and '_', "
                "not starting with a digit): correct the placeholder in the value"));
      }
      if (!is_set(variable)) {
        return internal::DeliveryFailed(
            Cat(what, " references {env:", internal::Escape(variable),
                "}, which is not set in the agent's environment (set config key 'agent.",
                internal::Escape(variable),
                "' on the instance, or set it in the start template or the daemon's base "
                "environment)"));
      }
    }
    return absl::OkStatus();
  };
  for (const Delivered& item : selected) {
    if (!item.dropped) {
      KT_RETURN_IF_ERROR(check(Cat("config key '", item.key, "'"), item.value));
    }
  }
  // The adapter's own start template renders into the agent too (an inline config in an env
  // value, an argument); a value a delivered variable replaces is not rendered.
  for (const auto& [name, value] : input.template_env) {
    if (!plan.env.contains(name)) {
      KT_RETURN_IF_ERROR(check(Cat("the start template's env ", internal::Escape(name)), value));
    }
  }
  for (size_t i = 0; i < input.template_args.size(); ++i) {
    KT_RETURN_IF_ERROR(check(Cat("the start template's argument ", i + 1), input.template_args[i]));
  }
  return absl::OkStatus();
}

}  // namespace

SecretResolver StoreResolver(const SecretsStore& store, EnvLookup environment) {
  return [&store, environment = std::move(environment)](std::string_view name) {
    return store.Resolve(name, environment);
  };
}

DeliveryInput InputFor(const contract::AdapterDeclaration& declaration,
                       std::vector<Entry> effective, std::map<std::string, std::string> base_env) {
  DeliveryInput input;
  input.mapping = declaration.config;
  input.template_env = declaration.start.env;
  input.template_args = declaration.start.args;
  input.base_env = std::move(base_env);
  input.effective = std::move(effective);
  return input;
}

std::vector<std::string> FileTargetPaths(const DeliveryInput& input) {
  std::set<std::string> paths;
  for (const Entry& entry : input.effective) {
    auto it = input.mapping.find(entry.key);
    if (it != input.mapping.end() && it->second.kind == ConfigTarget::Kind::kFile) {
      paths.insert(it->second.file_path);
    }
  }
  return {paths.begin(), paths.end()};
}

absl::StatusOr<DeliveryPlan> PlanDelivery(const DeliveryInput& input,
                                          const SecretResolver& resolve_secret) {
  DeliveryPlan plan;
  KT_ASSIGN_OR_RETURN(std::vector<Delivered> selected, Select(input, resolve_secret, plan.notices));
  PlaceEnvAndFlags(input, selected, plan);
  KT_RETURN_IF_ERROR(CheckEnvPlaceholders(input, selected, plan));
  KT_RETURN_IF_ERROR(RenderFiles(input, selected, plan));
  plan.effective_config_json = EntriesJson(Masked(input.effective));
  return plan;
}

}  // namespace ktesio::daemon::config
