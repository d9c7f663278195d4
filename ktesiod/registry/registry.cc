#include "registry/registry.h"

#include <sys/stat.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fs/fs.h"
#include "ktesio/contract/adapter.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/manifest.h"
#include "ktesio/contract/status_macros.h"
#include "paths/paths.h"
#include "registry/snapshot.h"

namespace ktesio::daemon::registry {
namespace {

namespace reason = contract::reason;

absl::StatusOr<std::unique_ptr<contract::Adapter>> ResolveAdapter(
    const v1::RegisterAgentRequest& request, std::string* manifest_path) {
  switch (request.source_case()) {
    case v1::RegisterAgentRequest::kBuiltinKind:
      return contract::LoadBuiltinAdapter(request.builtin_kind());
    case v1::RegisterAgentRequest::kManifest: {
      const v1::ManifestSource& source = request.manifest();
      *manifest_path = source.path();
      std::string content = source.content();
      if (content.empty()) {
        if (source.path().empty()) {
          return contract::MakeError(absl::StatusCode::kInvalidArgument, reason::kInvalidArgument,
                                     "manifest source names neither content nor a path");
        }
        KT_ASSIGN_OR_RETURN(std::string read, ReadManifestAt(source.path(), manifest_path));
        content = std::move(read);
      }
      return contract::LoadManifestAdapter(
          content, manifest_path->empty() ? "adapter.toml" : *manifest_path);
    }
    case v1::RegisterAgentRequest::SOURCE_NOT_SET:
      break;
  }
  return contract::MakeError(absl::StatusCode::kInvalidArgument, reason::kInvalidArgument,
                             "register needs a manifest or a builtin kind");
}

absl::Status CheckFileTargets(const v1::AdapterSnapshot& snapshot, const std::string& home) {
  for (const auto& [key, target] : snapshot.config()) {
    if (target.has_file()) {
      KT_RETURN_IF_ERROR(fs::CheckConfined(home, target.file().path()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string AgentHomePath(const std::string& state_dir, const std::string& name) {
  return absl::StrCat(state_dir, "/agents/", name);
}

absl::StatusOr<std::string> ReadManifestAt(const std::string& path, std::string* resolved_file) {
  struct stat st {};
  std::string file = path;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    file = absl::StrCat(path, path.back() == '/' ? "" : "/", "adapter.toml");
  }
  if (resolved_file != nullptr) {
    *resolved_file = file;
  }
  // A client names the path: a FIFO must not block the daemon, nor /dev/zero fill its memory.
  absl::StatusOr<std::string> content = fs::ReadRegularFile(file, contract::kMaxManifestBytes);
  if (!content.ok() && content.status().code() == absl::StatusCode::kNotFound) {
    return contract::MakeError(absl::StatusCode::kNotFound, reason::kManifestNotFound,
                               absl::StrCat("no adapter.toml at ", file));
  }
  if (!content.ok() && content.status().code() == absl::StatusCode::kInvalidArgument) {
    return contract::MakeError(absl::StatusCode::kInvalidArgument, reason::kManifestInvalid,
                               std::string(content.status().message()));
  }
  return content;
}

absl::StatusOr<v1::AdapterSnapshot> PreviewSnapshot(const v1::RegisterAgentRequest& request) {
  std::string manifest_path;
  KT_ASSIGN_OR_RETURN(std::unique_ptr<contract::Adapter> adapter,
                      ResolveAdapter(request, &manifest_path));
  return ToSnapshot((adapter)->Declaration(), (adapter)->IsBuiltin(), manifest_path);
}

absl::StatusOr<store::InstanceRow> Registry::Register(const v1::RegisterAgentRequest& request) {
  KT_RETURN_IF_ERROR(ValidateInstanceName(request.name()));
  KT_ASSIGN_OR_RETURN(v1::AdapterSnapshot previewed, PreviewSnapshot(request));
  v1::AdapterSnapshot& snapshot = previewed;
  KT_ASSIGN_OR_RETURN(std::optional<store::InstanceRow> existing,
                      store_.FindInstance(request.name()));
  if (existing.has_value()) {
    return contract::MakeError(absl::StatusCode::kAlreadyExists, reason::kDuplicateName,
                               absl::StrCat("an Agent Instance named '", request.name(),
                                            "' already exists (remove it "
                                            "first: ktctl agent remove ",
                                            request.name(), ")"));
  }

  const std::string home = AgentHomePath(state_dir_, request.name());
  const bool home_existed = fs::Exists(home);
  auto undo = [&](absl::Status status) {
    if (!home_existed) {
      fs::RemoveTree(home).IgnoreError();  // best effort: the registration already failed
    }
    return status;
  };
  for (const std::string& dir : {home, home + "/logs"}) {
    if (absl::Status status = fs::MakeDirs(dir, 0700); !status.ok()) {
      return undo(status);
    }
  }
  if (absl::Status status = CheckFileTargets(snapshot, home); !status.ok()) {
    return undo(status);
  }
  if (absl::Status status =
          fs::WriteFileAtomic(home + "/adapter.json", RenderAdapterJson(snapshot), 0600);
      !status.ok()) {
    return undo(status);
  }

  store::InstanceRow row;
  row.name = request.name();
  row.kind = snapshot.kind();
  row.snapshot = snapshot.SerializeAsString();
  row.state = "registered";
  row.cause = "registered";
  row.registered_at_ms = clock_();
  row.state_since_ms = row.registered_at_ms;
  row.home = home;
  if (absl::Status status = store_.InsertInstance(row); !status.ok()) {
    if (status.code() == absl::StatusCode::kAlreadyExists) {
      status = contract::MakeError(
          absl::StatusCode::kAlreadyExists, reason::kDuplicateName,
          absl::StrCat("an Agent Instance named '", request.name(), "' already exists"));
    }
    return undo(status);
  }
  return row;
}

absl::StatusOr<store::InstanceRow> Registry::Find(const std::string& name) {
  KT_RETURN_IF_ERROR(ValidateInstanceName(name));
  KT_ASSIGN_OR_RETURN(std::optional<store::InstanceRow> row, store_.FindInstance(name));
  if (!row.has_value()) {
    return contract::MakeError(absl::StatusCode::kNotFound, reason::kNotFound,
                               absl::StrCat("no Agent Instance named '", name, "'"));
  }
  return std::move(*row);
}

absl::Status Registry::Remove(const store::InstanceRow& row, bool delete_home) {
  KT_RETURN_IF_ERROR(store_.DeleteInstance(row.id));
  if (delete_home && row.home == AgentHomePath(state_dir_, row.name)) {
    return fs::RemoveTree(row.home);
  }
  return absl::OkStatus();
}

}  // namespace ktesio::daemon::registry
