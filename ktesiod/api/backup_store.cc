#include "api/backup_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"
#include "store/maintenance.h"

namespace ktesio::daemon::api {
namespace {

constexpr size_t kPieceBytes = 1 << 20;

}  // namespace

BackupStoreReactor::BackupStoreReactor(ApiContext& api, grpc::CallbackServerContext* ctx)
    : api_(api), ctx_(ctx) {
  std::optional<uid_t> refused;
  absl::StatusOr<uid_t> uid = Authorize(api, ctx, &refused);
  if (!uid.ok()) {
    if (refused.has_value()) {
      AuditRefused(api, *refused, "BackupStore", "", uid.status());
    }
    finished_ = true;
    Finish(WithReason(ctx, uid.status()));
    return;
  }
  worker_ = std::thread(&BackupStoreReactor::Work, this, api.engine->paths().state_dir,
                        static_cast<uint32_t>(*uid));
}

bool BackupStoreReactor::Send(v1::BackupStoreResponse piece) {
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) {
      return false;
    }
    current_ = std::move(piece);
    writing_ = true;
  }
  StartWrite(&current_);  // outside the lock: OnWriteDone takes it
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &BackupStoreReactor::WriteSettled));
  return !cancelled_ && !writing_;
}

void BackupStoreReactor::Work(std::string state_dir, uint32_t uid) {
  std::mt19937_64 random(std::random_device{}());
  const std::string copy = absl::StrCat(state_dir, "/backup-", random(), ".tmp");
  absl::Status status = store::WriteConsistentCopy(state_dir + "/state.db", copy);
  int fd = -1;
  if (status.ok()) {
    fd = open(copy.c_str(), O_RDONLY | O_CLOEXEC);
    unlink(copy.c_str());  // the open descriptor keeps it readable; nothing is left behind
    if (fd < 0) {
      status = contract::MakeError(absl::StatusCode::kInternal, contract::reason::kStoreError,
                                   absl::StrCat("cannot read the copy: ", std::strerror(errno)));
    }
  }
  if (status.ok()) {
    // The schema version is the header's user_version: 4 big-endian bytes at offset 60.
    unsigned char version[4] = {0, 0, 0, 0};
    v1::BackupStoreResponse first;
    if (pread(fd, version, sizeof(version), 60) == static_cast<ssize_t>(sizeof(version))) {
      first.set_schema_version(static_cast<uint32_t>(version[0]) << 24 |
                               static_cast<uint32_t>(version[1]) << 16 |
                               static_cast<uint32_t>(version[2]) << 8 | version[3]);
    }
    first.set_total_bytes(static_cast<uint64_t>(lseek(fd, 0, SEEK_END)));
    lseek(fd, 0, SEEK_SET);
    std::string buffer(kPieceBytes, '\0');
    bool alive = true;
    bool sent_first = false;
    while (alive) {
      ssize_t n = read(fd, buffer.data(), buffer.size());
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n < 0) {
        status =
            contract::MakeError(absl::StatusCode::kInternal, contract::reason::kStoreError,
                                absl::StrCat("reading the copy failed: ", std::strerror(errno)));
        break;
      }
      if (n == 0 && sent_first) {
        break;
      }
      v1::BackupStoreResponse piece = sent_first ? v1::BackupStoreResponse() : first;
      piece.set_data(buffer.data(), static_cast<size_t>(n));
      sent_first = true;
      alive = Send(std::move(piece));
      if (n == 0) {
        break;
      }
    }
    close(fd);
  }
  engine::Engine* engine = api_.engine;
  engine->Post([engine, uid, status] { engine->Audit(uid, "BackupStore", "", status); });
  absl::MutexLock lock(&mu_);
  if (!finished_) {
    finished_ = true;
    Finish(WithReason(ctx_, status));
  }
}

void BackupStoreReactor::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);  // a waiting Send wakes when the lock is released
  writing_ = false;
  if (!ok) {
    cancelled_ = true;
  }
}

void BackupStoreReactor::OnCancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
}

void BackupStoreReactor::OnDone() {
  if (worker_.joinable()) {
    worker_.join();
  }
  delete this;
}

}  // namespace ktesio::daemon::api
