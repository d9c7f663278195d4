#include "config/instance_file.h"

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "config/errors.h"
#include "config/keys.h"
#include "config/toml_io.h"
#include "fs/fs.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::daemon::config::instance_file {

using internal::Cat;
using internal::TomlLeaf;

namespace {

ABSL_CONST_INIT absl::Mutex write_mutex(absl::kConstInit);

const std::vector<std::string> kComment = {
    "Agent instance configuration (the \"instance\" layer), written by `ktctl agent config set`.",
    "Hand edits are validated when the agent starts."};

std::string_view KindName(TomlLeaf::Kind kind) {
  switch (kind) {
    case TomlLeaf::Kind::kString:
      return "a string";
    case TomlLeaf::Kind::kInteger:
      return "an integer";
    case TomlLeaf::Kind::kBoolean:
      return "a boolean";
    case TomlLeaf::Kind::kOther:
      return "another type";
  }
  return "another type";
}

TomlLeaf::Kind ExpectedKind(std::string_view key) {
  switch (TomlKindOf(key)) {
    case TomlKind::kInteger:
      return TomlLeaf::Kind::kInteger;
    case TomlKind::kBoolean:
      return TomlLeaf::Kind::kBoolean;
    case TomlKind::kString:
      return TomlLeaf::Kind::kString;
  }
  return TomlLeaf::Kind::kString;
}

// Re-raises `status` with "<where>: " in front of its message, keeping code and reason.
absl::Status At(const absl::Status& status, std::string_view where) {
  return internal::Error(status.code(), contract::ErrorReason(status),
                         Cat(where, ": ", std::string(status.message())));
}

// The file's leaves; a missing file has none.
absl::StatusOr<std::vector<TomlLeaf>> ReadLeaves(const std::string& path) {
  // Hand edits are possible: a FIFO or a device in its place must not block or flood the daemon.
  absl::StatusOr<std::string> text = fs::ReadRegularFile(path, fs::kMaxConfigFileBytes);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) {
      return std::vector<TomlLeaf>();
    }
    return text.status();
  }
  return internal::ParseTomlLeaves(*text, path);
}

absl::Status Write(const std::string& path, const std::vector<TomlLeaf>& leaves) {
  absl::StatusOr<std::string> text = internal::RenderTomlLeaves(leaves, kComment);
  if (!text.ok()) {
    return At(text.status(), Cat(path, ": cannot rewrite (fix or remove the entry by hand)"));
  }
  return fs::WriteFileAtomic(path, *text, 0600);
}

std::vector<std::string> SplitKey(std::string_view key) {
  std::vector<std::string> path;
  size_t start = 0;
  while (true) {
    const size_t dot = key.find('.', start);
    path.emplace_back(key.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) {
      return path;
    }
    start = dot + 1;
  }
}

}  // namespace

std::string PathIn(const std::string& home) { return Cat(home, "/", kFileName); }

absl::StatusOr<std::map<std::string, std::string>> Load(const std::string& home) {
  const std::string path = PathIn(home);
  KT_ASSIGN_OR_RETURN(std::vector<TomlLeaf> leaves, ReadLeaves(path));
  std::map<std::string, std::string> layer;
  for (const TomlLeaf& leaf : leaves) {
    const std::string key = internal::JoinPath(leaf.path);
    const std::string where = Cat(path, ":", leaf.line, ":", leaf.column);
    if (absl::Status status = ValidateKey(key); !status.ok()) {
      return At(status, where);
    }
    if (leaf.kind != ExpectedKind(key)) {
      return internal::ConfigInvalid(
          Cat(where, ": '", key, "' must be ", KindName(ExpectedKind(key)), ", got ",
              leaf.kind == TomlLeaf::Kind::kOther ? Cat("a ", leaf.text)
                                                  : std::string(KindName(leaf.kind))));
    }
    absl::StatusOr<std::string> value = ValidateValue(key, leaf.text);
    if (!value.ok()) {
      return At(value.status(), where);
    }
    if (!layer.emplace(key, *value).second) {
      return internal::ConfigInvalid(Cat(where, ": '", key, "' is defined twice"));
    }
  }
  return layer;
}

absl::StatusOr<std::string> Set(const std::string& home, std::string_view key,
                                std::string_view value) {
  KT_ASSIGN_OR_RETURN(std::string normalized, ValidateValue(key, value));
  absl::MutexLock lock(&write_mutex);
  const std::string path = PathIn(home);
  KT_ASSIGN_OR_RETURN(std::vector<TomlLeaf> leaves, ReadLeaves(path));
  std::erase_if(leaves, [&](const TomlLeaf& leaf) { return internal::JoinPath(leaf.path) == key; });
  TomlLeaf leaf;
  leaf.path = SplitKey(key);
  leaf.kind = ExpectedKind(key);
  leaf.text = normalized;
  leaves.push_back(std::move(leaf));
  KT_RETURN_IF_ERROR(Write(path, leaves));
  return normalized;
}

absl::StatusOr<bool> Unset(const std::string& home, std::string_view key) {
  absl::MutexLock lock(&write_mutex);
  const std::string path = PathIn(home);
  KT_ASSIGN_OR_RETURN(std::vector<TomlLeaf> leaves, ReadLeaves(path));
  const size_t removed = std::erase_if(
      leaves, [&](const TomlLeaf& leaf) { return internal::JoinPath(leaf.path) == key; });
  if (removed == 0) {
    absl::Status status = ValidateKey(key);
    if (!status.ok() && !absl::IsPermissionDenied(status)) {
      return status;
    }
    return false;
  }
  KT_RETURN_IF_ERROR(Write(path, leaves));
  return true;
}

}  // namespace ktesio::daemon::config::instance_file
