#include "daemon/maintenance.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <set>

#include "absl/strings/str_cat.h"
#include "fs/fs.h"
#include "ktesio/contract/status_macros.h"
#include "paths/paths.h"
#include "server/instance_lock.h"
#include "shim/pid_record.h"
#include "store/maintenance.h"
#include "store/store.h"
#include "supervisor/lifecycle.h"

namespace ktesio::daemon {
namespace {

void Say(const std::string& line) { std::printf("%s\n", line.c_str()); }

absl::StatusOr<DaemonPaths> Paths(const DaemonOptions& options) {
  return ResolveDaemonPaths(options.paths, ProcessEnvironment());
}

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

// Directories directly under `dir`.
std::vector<std::string> Subdirectories(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    return out;
  }
  while (dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    struct stat st {};
    if (name != "." && name != ".." && lstat((dir + "/" + name).c_str(), &st) == 0 &&
        S_ISDIR(st.st_mode)) {
      out.push_back(dir + "/" + name);
    }
  }
  closedir(d);
  return out;
}

// Copies `from` to `to` durably (written to a temp file, fsynced, renamed, directory fsynced).
absl::Status CopyDurably(const std::string& from, const std::string& to) {
  KT_ASSIGN_OR_RETURN(std::string bytes, fs::ReadFile(from));
  return fs::WriteFileAtomic(to, bytes, 0600);
}

std::string UtcStamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y%m%dT%H%M%SZ", &tm);
  return buffer;
}

}  // namespace

int RunCheck(const DaemonOptions& options) {
  absl::StatusOr<DaemonPaths> paths = Paths(options);
  if (!paths.ok()) {
    std::fprintf(stderr, "ktesiod --check: %s\n", std::string(paths.status().message()).c_str());
    return 2;
  }
  const std::string db = paths->state_dir + "/state.db";
  int problems = 0;
  auto problem = [&](const std::string& line) {
    Say("problem: " + line);
    ++problems;
  };
  Say("state dir: " + paths->state_dir);
  if (!Exists(db)) {
    Say("store: " + db + " does not exist (a new daemon creates it)");
    return 0;
  }
  absl::StatusOr<store::StoreInspection> inspection = store::InspectStore(db);
  if (!inspection.ok()) {
    problem(std::string(inspection.status().message()));
    return 1;
  }
  Say(absl::StrCat("store: ", db, " (schema version ", inspection->schema_version,
                   "; this ktesiod writes ", store::kSchemaVersion, ")"));
  if (inspection->schema_version > store::kSchemaVersion) {
    problem("the store was written by a newer ktesiod; this one refuses to open it");
  }
  if (inspection->ok()) {
    Say("integrity: ok");
  } else {
    for (const std::string& line : inspection->integrity) {
      problem("integrity: " + line);
    }
  }
  Say(absl::StrCat("instances: ", inspection->instances.size(), ", events: ", inspection->events,
                   ", ledger rows: ", inspection->ledger_rows));
  // The state dir against the store: every instance's home, every home's instance, run dirs.
  std::set<std::string> homes;
  for (const store::StoreInspection::Instance& instance : inspection->instances) {
    homes.insert(instance.home);
    if (!Exists(instance.home)) {
      problem("instance '" + instance.name + "': its home " + instance.home + " is gone");
      continue;
    }
    const std::string run = instance.home + "/run";
    if (!supervisor::IsLive(
            supervisor::ParseState(instance.state).value_or(supervisor::State::kRegistered)) &&
        shim::ReadPidRecord(run + "/" + shim::kShimPidFile) != 0) {
      Say("note: instance '" + instance.name + "' is " + instance.state +
          " but its run dir still holds a spawn record (" + run + "); the next start replaces it");
    }
  }
  for (const std::string& home : Subdirectories(paths->state_dir + "/agents")) {
    if (!homes.contains(home)) {
      problem("orphaned agent home " + home +
              " (no instance owns it: left by `agent remove` without --delete, or by a "
              "restore of an older backup)");
    }
  }
  Say(problems == 0 ? "check: ok" : absl::StrCat("check: ", problems, " problem(s)"));
  return problems == 0 ? 0 : 1;
}

int RunRestore(const DaemonOptions& options, const std::string& backup) {
  absl::StatusOr<DaemonPaths> paths = Paths(options);
  if (!paths.ok()) {
    std::fprintf(stderr, "ktesiod --restore: %s\n", std::string(paths.status().message()).c_str());
    return 2;
  }
  auto refuse = [](const std::string& why) {
    std::fprintf(stderr, "ktesiod --restore: %s\n", why.c_str());
    return 1;
  };
  absl::StatusOr<store::StoreInspection> inspection = store::InspectStore(backup);
  if (!inspection.ok()) {
    return refuse(absl::StrCat("refused: ", inspection.status().message()));
  }
  if (!inspection->ok()) {
    return refuse(absl::StrCat("refused: ", backup,
                               " fails its integrity check: ", inspection->integrity.front()));
  }
  if (inspection->schema_version < 1 || inspection->schema_version > store::kSchemaVersion) {
    return refuse(absl::StrCat("refused: ", backup, " has schema version ",
                               inspection->schema_version, "; this ktesiod reads 1 to ",
                               store::kSchemaVersion));
  }
  if (absl::Status status = fs::MakeDirs(paths->state_dir, 0700, true); !status.ok()) {
    return refuse(std::string(status.message()));
  }
  // No daemon may own the state dir while its store is replaced: hold its lock meanwhile.
  absl::StatusOr<std::unique_ptr<server::InstanceLock>> lock =
      server::InstanceLock::Acquire(paths->state_dir);
  if (!lock.ok()) {
    return refuse(absl::StrCat("refused: ", lock.status().message(),
                               " — stop it first (the live store is never overwritten)"));
  }
  const std::string db = paths->state_dir + "/state.db";
  std::string kept;
  if (Exists(db)) {
    kept = absl::StrCat(db, ".before-restore-", UtcStamp());
    for (const char* suffix : {"", "-wal"}) {
      if (Exists(db + suffix) && rename((db + suffix).c_str(), (kept + suffix).c_str()) != 0) {
        return refuse(absl::StrCat("cannot move ", db, suffix, " aside: ", std::strerror(errno)));
      }
    }
    unlink((db + "-shm").c_str());
  }
  if (absl::Status status = CopyDurably(backup, db); !status.ok()) {
    return refuse(absl::StrCat("copying the backup failed: ", status.message(),
                               kept.empty() ? "" : absl::StrCat("; the previous store is ", kept)));
  }
  Say(absl::StrCat("restored ", backup, " into ", db, " (schema version ",
                   inspection->schema_version, ", ", inspection->instances.size(), " instance(s), ",
                   inspection->ledger_rows, " ledger row(s))"));
  if (!kept.empty()) {
    Say("the store it replaced is kept as " + kept);
  }
  Say("start ktesiod: it reconciles every instance the backup records as running (agents that "
      "are gone fail and their restart policy applies)");
  return 0;
}

}  // namespace ktesio::daemon
