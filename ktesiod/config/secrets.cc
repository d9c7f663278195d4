#include "config/secrets.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/strings/escaping.h"
#include "absl/synchronization/mutex.h"
#include "config/errors.h"
#include "config/keys.h"
#include "config/toml_io.h"
#include "fs/fs.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::daemon::config {

using internal::Cat;
using internal::TomlLeaf;
namespace reason = contract::reason;

namespace {

ABSL_CONST_INIT absl::Mutex store_mutex(absl::kConstInit);

const std::vector<std::string> kComment = {
    "Ktesio secrets store: the only file holding secret cleartext, by design. Keep it mode 0600.",
    "Managed with `ktctl secret set|list|rm`; config values refer to entries as secret:NAME."};

absl::Status Refused(const std::string& path, std::string_view why) {
  return internal::Error(absl::StatusCode::kPermissionDenied, reason::kPermissionDenied,
                         Cat("refusing to read secrets file ", path, ": ", why));
}

absl::Status IoError(std::string_view what, const std::string& path, int err) {
  return internal::Error(absl::StatusCode::kInternal, reason::kIoError,
                         Cat(what, " ", path, ": ", std::strerror(err)));
}

absl::Status CheckName(std::string_view name) {
  if (!IsValidSecretName(name)) {
    return internal::ConfigInvalid(Cat("invalid secret name '", internal::Escape(name),
                                       "': use 1 to 128 characters [A-Za-z0-9_.-]"));
  }
  return absl::OkStatus();
}

absl::Status CheckValue(std::string_view name, std::string_view value) {
  if (value.empty()) {
    return internal::ConfigInvalid(Cat("secret '", name, "' has an empty value"));
  }
  if (value.size() > kMaxSecretBytes) {
    return internal::ConfigInvalid(
        Cat("secret '", name, "' is longer than ", kMaxSecretBytes, " bytes"));
  }
  if (value.find('\0') != std::string_view::npos) {
    return internal::ConfigInvalid(Cat("secret '", name, "' contains a NUL byte"));
  }
  return absl::OkStatus();
}

// Opens without following symlinks and checks the mode on the open descriptor (no race between
// the check and the read).
absl::StatusOr<std::string> ReadGuarded(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP) {
      return Refused(path, "it is a symbolic link");
    }
    const int err = errno;
    if (err == ENOENT) {
      return internal::Error(absl::StatusCode::kNotFound, reason::kNotFound, "");
    }
    return IoError("cannot open", path, err);
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return IoError("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode) || (st.st_mode & 077) != 0) {
    close(fd);
    if (!S_ISREG(st.st_mode)) {
      return Refused(path, "it is not a regular file");
    }
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Refused(path, Cat("its mode is ", mode,
                             " but must give group and others no access "
                             "(run: chmod 600 ",
                             path, ")"));
  }
  return fs::ReadAndClose(fd, path);
}

absl::StatusOr<std::map<std::string, std::string>> ReadAll(const std::string& path) {
  absl::StatusOr<std::string> text = ReadGuarded(path);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) {
      return std::map<std::string, std::string>();
    }
    return text.status();
  }
  KT_ASSIGN_OR_RETURN(std::vector<TomlLeaf> leaves, internal::ParseTomlLeaves(*text, path));
  std::map<std::string, std::string> secrets;
  for (const TomlLeaf& leaf : leaves) {
    const std::string where = Cat(path, ":", leaf.line, ":", leaf.column, ": ");
    const bool plain = leaf.path.size() == 1;
    const bool encoded = leaf.path.size() == 2 && leaf.path[1] == "base64";
    if ((!plain && !encoded) || leaf.kind != TomlLeaf::Kind::kString) {
      return internal::ConfigInvalid(
          Cat(where, "expected NAME = \"value\" or NAME = { base64 = \"...\" }"));
    }
    std::string value = leaf.text;
    if (encoded && !absl::Base64Unescape(internal::ToAbsl(leaf.text), &value)) {
      return internal::ConfigInvalid(Cat(where, "invalid base64"));
    }
    const std::string& name = leaf.path[0];
    for (const absl::Status& status : {CheckName(name), CheckValue(name, value)}) {
      if (!status.ok()) {
        return internal::ConfigInvalid(Cat(where, std::string(status.message())));
      }
    }
    if (!secrets.emplace(name, std::move(value)).second) {
      return internal::ConfigInvalid(Cat(where, "secret '", name, "' is defined twice"));
    }
  }
  return secrets;
}

absl::Status WriteAll(const std::string& path, const std::map<std::string, std::string>& all) {
  std::vector<TomlLeaf> leaves;
  for (const auto& [name, value] : all) {
    TomlLeaf leaf;
    leaf.path = {name};
    leaf.text = value;
    if (!internal::IsValidUtf8(value)) {
      leaf.path.push_back("base64");
      leaf.text = absl::Base64Escape(internal::ToAbsl(value));
    }
    leaves.push_back(std::move(leaf));
  }
  KT_ASSIGN_OR_RETURN(std::string text, internal::RenderTomlLeaves(leaves, kComment));
  return fs::WriteFileAtomic(path, text, 0600);
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) {
      return std::nullopt;
    }
    return std::string(value);
  };
}

SecretsStore::SecretsStore(std::string state_dir) : path_(Cat(state_dir, "/", kSecretsFileName)) {}

absl::StatusOr<bool> SecretsStore::Set(std::string_view name, std::string_view value) {
  for (const absl::Status& status : {CheckName(name), CheckValue(name, value)}) {
    if (!status.ok()) {
      return status;
    }
  }
  absl::MutexLock lock(&store_mutex);
  KT_ASSIGN_OR_RETURN(auto all, ReadAll(path_));
  auto [it, inserted] = all.insert_or_assign(std::string(name), std::string(value));
  KT_RETURN_IF_ERROR(WriteAll(path_, all));
  return !inserted;
}

absl::StatusOr<std::vector<std::string>> SecretsStore::List() const {
  absl::MutexLock lock(&store_mutex);
  KT_ASSIGN_OR_RETURN(auto all, ReadAll(path_));
  std::vector<std::string> names;
  for (const auto& [name, value] : all) {
    names.push_back(name);
  }
  return names;
}

absl::Status SecretsStore::Remove(std::string_view name) {
  KT_RETURN_IF_ERROR(CheckName(name));
  absl::MutexLock lock(&store_mutex);
  KT_ASSIGN_OR_RETURN(auto all, ReadAll(path_));
  if (all.erase(std::string(name)) == 0) {
    return internal::Error(absl::StatusCode::kNotFound, reason::kNotFound,
                           Cat("no secret named '", name, "'"));
  }
  return WriteAll(path_, all);
}

absl::StatusOr<std::string> SecretsStore::Resolve(std::string_view name,
                                                  const EnvLookup& environment) const {
  KT_RETURN_IF_ERROR(CheckName(name));
  {
    absl::MutexLock lock(&store_mutex);
    KT_ASSIGN_OR_RETURN(auto all, ReadAll(path_));
    if (auto it = all.find(std::string(name)); it != all.end()) {
      return it->second;
    }
  }
  if (environment) {
    std::optional<std::string> value = environment(std::string(name));
    if (value.has_value() && !value->empty()) {
      return *value;
    }
  }
  return internal::DeliveryFailed(Cat("secret '", name,
                                      "' is not resolvable: tried the secrets store (", path_,
                                      ") and the daemon environment variable ", name,
                                      " (set it with `ktctl secret set ", name, "`)"));
}

}  // namespace ktesio::daemon::config
