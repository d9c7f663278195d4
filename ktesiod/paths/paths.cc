#include "paths/paths.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"
#include "ktesio/contract/text.h"

namespace ktesio::daemon {
namespace {

namespace reason = contract::reason;

class RealEnvironment : public Environment {
 public:
  std::string Get(std::string_view name) const override {
    const char* value = std::getenv(std::string(name).c_str());
    return value == nullptr ? "" : value;
  }
};

std::string UserStateDir(const Environment& env) {
  std::string xdg = env.Get("XDG_DATA_HOME");
  if (!xdg.empty() && xdg.front() == '/') {
    return xdg + "/ktesio";
  }
  std::string home = env.Get("HOME");
  if (home.empty()) {
    return "";
  }
  return home + "/.local/share/ktesio";
}

std::string UserSocketPath(const Environment& env, const std::string& state_dir) {
  std::string runtime = env.Get("XDG_RUNTIME_DIR");
  if (!runtime.empty() && runtime.front() == '/') {
    return runtime + "/ktesio/ktesiod.sock";
  }
  return state_dir + "/ktesiod.sock";
}

}  // namespace

const Environment& ProcessEnvironment() {
  static const RealEnvironment env;
  return env;
}

absl::Status ValidateSocketPath(std::string_view path) {
  if (path.empty()) {
    return contract::MakeError(absl::StatusCode::kInvalidArgument, reason::kInvalidArgument,
                               "socket path is empty");
  }
  if (path.size() > kMaxSocketPathLength) {
    return contract::MakeError(
        absl::StatusCode::kInvalidArgument, reason::kInvalidArgument,
        absl::StrCat("socket path is ", path.size(), " bytes, over the OS limit of ",
                     kMaxSocketPathLength, ": ", std::string(path),
                     " (choose a shorter --socket)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DaemonPaths> ResolveDaemonPaths(const PathOverrides& overrides,
                                               const Environment& env) {
  DaemonPaths paths;
  paths.system_mode = overrides.system_mode;

  std::string state = overrides.state_dir;
  if (state.empty()) {
    state = env.Get("KTESIO_STATE_DIR");
  }
  if (!state.empty()) {
    if (state.front() != '/') {
      return contract::MakeError(absl::StatusCode::kInvalidArgument, reason::kInvalidArgument,
                                 absl::StrCat("state dir must be an absolute path: ", state));
    }
  } else if (paths.system_mode) {
    state = "/var/lib/ktesio";
  } else {
    state = UserStateDir(env);
    if (state.empty()) {
      return contract::MakeError(absl::StatusCode::kInvalidArgument, reason::kInvalidArgument,
                                 "cannot find a state dir: neither XDG_DATA_HOME nor HOME is set "
                                 "(pass --state-dir)");
    }
  }
  while (state.size() > 1 && state.back() == '/') {
    state.pop_back();
  }
  paths.state_dir = state;

  std::string socket = overrides.socket_path;
  if (socket.empty()) {
    socket = env.Get("KTESIO_SOCKET");
  }
  if (socket.empty()) {
    socket = paths.system_mode ? "/run/ktesio/ktesiod.sock" : UserSocketPath(env, state);
  }
  if (socket.front() != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd)) == nullptr) {
      return contract::MakeError(absl::StatusCode::kInvalidArgument, reason::kInvalidArgument,
                                 "cannot resolve a relative socket path");
    }
    socket = absl::StrCat(cwd, "/", socket);
  }
  KT_RETURN_IF_ERROR(ValidateSocketPath(socket));
  paths.socket_path = socket;

  paths.config_path = overrides.config_path;
  if (paths.config_path.empty()) {
    paths.config_path = paths.system_mode ? "/etc/ktesio/ktesiod.toml" : state + "/ktesiod.toml";
  }
  return paths;
}

absl::Status ValidateInstanceName(std::string_view name) {
  auto bad = [&](std::string_view why) {
    return contract::MakeError(
        absl::StatusCode::kInvalidArgument, reason::kInvalidName,
        // The name is the client's: escaped (no terminal sequences, no line breaks) and bounded.
        absl::StrCat("invalid instance name '", contract::text::EscapeBounded(name, 128),
                     "': ", std::string(why),
                     " (names match ^[a-z0-9][a-z0-9_-]*$, at most 128 characters)"));
  };
  if (name.empty()) {
    return bad("empty");
  }
  if (name.size() > 128) {
    return bad(absl::StrCat("too long (", name.size(), " characters)"));
  }
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (i == 0 && !alnum) {
      return bad("must start with a lower-case letter or digit");
    }
    if (!alnum && c != '_' && c != '-') {
      return bad("contains a character outside [a-z0-9_-]");
    }
  }
  return absl::OkStatus();
}

}  // namespace ktesio::daemon
