#include "cli/fleet_files.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cli/manifest_file.h"
#include "ktesio/contract/fleet_file.h"
#include "ktesio/contract/utf8.h"

namespace ktesio::cli {
namespace {

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

std::string Absolute(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path;
}

// The files a path names: itself, or the *.toml files of a directory.
std::vector<std::string> Expand(const std::string& path, std::vector<std::string>* problems) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    // The cause as the system gives it (a symlink loop is not a missing file).
    const int error = errno;
    problems->push_back(absl::StrCat(
        path, ": ", error == ENOENT ? "no such file or directory" : std::strerror(error)));
    return {};
  }
  if (!S_ISDIR(st.st_mode)) {
    return {path};
  }
  std::vector<std::string> files;
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) {
    problems->push_back(absl::StrCat(path, ": cannot list the directory: ", std::strerror(errno)));
    return {};
  }
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.size() > 5 && name.ends_with(".toml") && name[0] != '.') {
      files.push_back(absl::StrCat(path, path.ends_with("/") ? "" : "/", name));
    }
  }
  closedir(dir);
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    problems->push_back(absl::StrCat(path, ": no *.toml fleet files in this directory"));
  }
  return files;
}

bool ReadText(const std::string& path, std::string* text, std::vector<std::string>* problems) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    problems->push_back(absl::StrCat(path, ": not a regular file"));
    return false;
  }
  if (static_cast<size_t>(st.st_size) > kMaxFleetFileBytes) {
    problems->push_back(
        absl::StrCat(path, ": larger than ", kMaxFleetFileBytes >> 20, " MiB; split the fleet"));
    return false;
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    problems->push_back(absl::StrCat(path, ": cannot be read"));
    return false;
  }
  text->assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  if (std::optional<size_t> bad = contract::FirstInvalidUtf8(*text)) {
    problems->push_back(absl::StrCat(path, ": not valid UTF-8 (byte ", *bad, ")"));
    return false;
  }
  return true;
}

v1::SourceLocation At(const std::string& file, uint32_t line) {
  v1::SourceLocation location;
  location.set_file(file);
  location.set_line(line);
  return location;
}

void AddInstance(const std::string& file, const contract::FleetAgentSpec& agent,
                 v1::FleetSpec* fleet, FleetFiles* files) {
  if (!agent.name_valid) {
    return;  // reported by the parse; the daemon would only say it again
  }
  std::vector<std::string>* problems = &files->problems;
  v1::FleetInstanceSpec* spec = fleet->add_instances();
  spec->set_name(agent.name);
  *spec->mutable_location() = At(file, agent.line);
  if (!agent.kind.empty()) {
    spec->set_builtin_kind(agent.kind);
  } else if (agent.manifest.empty()) {
    // Neither manifest nor kind: the file's parse already reported it at the agent's line.
  } else {
    const std::string path = agent.manifest.starts_with("/")
                                 ? agent.manifest
                                 : absl::StrCat(DirOf(file), "/", agent.manifest);
    absl::StatusOr<ManifestText> text = ReadManifestFile(path);
    if (!text.ok()) {
      problems->push_back(absl::StrCat(file, ":", agent.manifest_line, ": agents.", agent.name,
                                       ": ", std::string(text.status().message())));
    } else {
      // The content travels once per distinct file, in FleetFiles::manifests.
      const std::string absolute = Absolute(text->path);
      spec->mutable_manifest()->set_path(absolute);
      files->manifests.emplace(absolute, std::move(text->content));
    }
  }
  spec->mutable_labels()->insert(agent.labels.begin(), agent.labels.end());
  if (agent.state == "running") {
    spec->set_state(v1::DESIRED_STATE_RUNNING);
  } else if (agent.state == "stopped") {
    spec->set_state(v1::DESIRED_STATE_STOPPED);
  }
  for (const contract::FleetAgentSpec::Setting& setting : agent.config) {
    v1::ConfigSetting* out = spec->add_config();
    out->set_key(setting.key);
    out->set_value(setting.value);
    *out->mutable_location() = At(file, setting.line);
  }
}

}  // namespace

FleetFiles ReadFleetFiles(const std::vector<std::string>& paths) {
  FleetFiles result;
  std::set<std::pair<dev_t, ino_t>>
      seen;  // a file named twice (itself and its directory) is read once
  for (const std::string& given : paths) {
    for (const std::string& file : Expand(given, &result.problems)) {
      if (struct stat st{};
          stat(file.c_str(), &st) == 0 && !seen.insert({st.st_dev, st.st_ino}).second) {
        continue;
      }
      std::string text;
      if (!ReadText(file, &text, &result.problems)) {
        continue;
      }
      contract::FleetFileParse parsed = contract::ParseFleetFile(text, file);
      result.problems.insert(result.problems.end(), parsed.problems.begin(), parsed.problems.end());
      v1::FleetSpec fleet;
      fleet.set_name(parsed.spec.name);
      *fleet.mutable_location() = At(file, parsed.spec.name_line);
      for (const contract::FleetAgentSpec& agent : parsed.spec.agents) {
        AddInstance(file, agent, &fleet, &result);
      }
      result.fleets.push_back(std::move(fleet));
    }
  }
  return result;
}

}  // namespace ktesio::cli
