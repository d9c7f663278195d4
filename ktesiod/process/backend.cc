#include "process/backend.h"

#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fs/fs.h"

namespace ktesio::daemon::process {

absl::StatusOr<int64_t> ProcessStartTime(pid_t pid) {
  // fs::ReadFile (POSIX read), never a filebuf: libstdc++'s filebuf throws when read() fails,
  // as it does (ESRCH) on the /proc files of a process that exits meanwhile.
  absl::StatusOr<std::string> read = fs::ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!read.ok() || read->empty()) {
    return absl::NotFoundError(absl::StrCat("no process ", pid));
  }
  const std::string& text = *read;
  size_t paren = text.rfind(')');
  if (paren == std::string::npos) {
    return absl::NotFoundError(absl::StrCat("unreadable /proc/", pid, "/stat"));
  }
  std::vector<std::string> fields = absl::StrSplit(text.substr(paren + 2), ' ');
  int64_t start = 0;
  // Field 22 of stat; fields after ')' start at field 3.
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &start)) {
    return absl::NotFoundError(absl::StrCat("unparsable /proc/", pid, "/stat"));
  }
  return start;
}

std::optional<ExitRecord> ParseExitRecord(const std::string& text) {
  std::vector<std::string> words = absl::StrSplit(text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  if (words.size() != 2) {
    return std::nullopt;
  }
  ExitRecord record;
  if (!absl::SimpleAtoi(words[1], &record.value)) {
    return std::nullopt;
  }
  if (words[0] == "exited") {
    record.kind = ExitRecord::Kind::kExited;
  } else if (words[0] == "signaled") {
    record.kind = ExitRecord::Kind::kSignaled;
  } else if (words[0] == "exec-failed") {
    record.kind = ExitRecord::Kind::kExecFailed;
  } else {
    return std::nullopt;
  }
  return record;
}

std::string DescribeExit(const ExitRecord& record) {
  switch (record.kind) {
    case ExitRecord::Kind::kExited:
      return absl::StrCat("exit code ", record.value);
    case ExitRecord::Kind::kSignaled: {
      const char* name = sigabbrev_np(record.value);
      return absl::StrCat("signal ", record.value,
                          name == nullptr ? "" : absl::StrCat(" (SIG", name, ")"));
    }
    case ExitRecord::Kind::kExecFailed:
      return absl::StrCat("exec failed: ", std::strerror(record.value));
  }
  return "unknown exit";
}

}  // namespace ktesio::daemon::process
