#pragma once

// A server-streaming reactor fed from the engine thread: responses are queued and written one at
// a time (gRPC allows one outstanding write). The queue is bounded so a slow client can never
// make the engine buffer without limit: Enqueue reports false once the bound is reached.
//
// Engine-side producers hold a Link; after the call is done the link's reactor is null and
// producers stop.

#include <deque>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "api/call.h"

namespace ktesio::daemon::api {

template <typename Response>
class QueuedWriter : public grpc::ServerWriteReactor<Response> {
 public:
  struct Link {
    absl::Mutex mu;
    QueuedWriter* reactor ABSL_GUARDED_BY(mu) = nullptr;
  };

  QueuedWriter(grpc::CallbackServerContext* ctx, size_t max_queued)
      : ctx_(ctx), max_queued_(max_queued), link_(NewLink(this)) {}

  std::shared_ptr<Link> link() const { return link_; }

  // Queues a response. Returns false (and queues nothing) when the client is too far behind or
  // the call is ending.
  bool Enqueue(Response response) {
    absl::MutexLock lock(&mu_);
    if (final_.has_value() || queue_.size() >= max_queued_) {
      return false;
    }
    queue_.push_back(std::move(response));
    if (!writing_) {
      writing_ = true;
      this->StartWrite(&queue_.front());
    }
    return true;
  }

  // Ends the call with `status` once everything queued has been written.
  void End(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    EndLocked(status);
  }
  // The same for the daemon's own errors: a non-OK status carries its stable reason in the
  // `ktesio-reason` trailer, as every unary answer does.
  void End(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    if (!final_.has_value()) {
      EndLocked(WithReason(ctx_, status));
    }
  }
  // Queues `last` even past the bound (it is the one message that says why the stream ends),
  // then ends the call with `status` (its reason in the trailer).
  void EndWith(Response last, const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    if (!final_.has_value()) {  // the trailer only on the call's one ending
      EndWithLocked(std::move(last), WithReason(ctx_, status));
    }
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    queue_.pop_front();
    if (!ok) {
      writing_ = false;
      if (!final_.has_value()) {
        final_ = grpc::Status::CANCELLED;
      }
      if (!finished_) {
        finished_ = true;
        this->Finish(grpc::Status::CANCELLED);
      }
      return;
    }
    if (!queue_.empty()) {
      this->StartWrite(&queue_.front());
      return;
    }
    writing_ = false;
    if (final_.has_value() && !finished_) {
      finished_ = true;
      this->Finish(*final_);
    }
  }

  void OnCancel() override { End(grpc::Status::CANCELLED); }

  void OnDone() override {
    {
      absl::MutexLock lock(&link_->mu);
      link_->reactor = nullptr;
    }
    Stopped();
    delete this;
  }

 protected:
  // Called once when the call is over (client gone or finished); release engine-side state.
  virtual void Stopped() {}

 private:
  void EndWithLocked(Response last, const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (final_.has_value()) {
      return;
    }
    queue_.push_back(std::move(last));
    final_ = status;
    if (!writing_) {
      writing_ = true;
      this->StartWrite(&queue_.front());
    }
  }
  void EndLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (final_.has_value()) {
      return;
    }
    final_ = status;
    if (!writing_ && !finished_) {
      finished_ = true;
      this->Finish(status);
    }
  }
  grpc::CallbackServerContext* const ctx_;
  const size_t max_queued_;
  std::shared_ptr<Link> link_;
  static std::shared_ptr<Link> NewLink(QueuedWriter* reactor) {
    auto link = std::make_shared<Link>();
    absl::MutexLock lock(&link->mu);
    link->reactor = reactor;
    return link;
  }

  absl::Mutex mu_;
  std::deque<Response> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> final_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

// Runs `fn(reactor)` under the link's lock when the call is still alive. Returns false when the
// call is gone.
template <typename Response, typename Fn>
bool WithReactor(const std::shared_ptr<typename QueuedWriter<Response>::Link>& link, Fn fn) {
  absl::MutexLock lock(&link->mu);
  if (link->reactor == nullptr) {
    return false;
  }
  fn(*link->reactor);
  return true;
}

}  // namespace ktesio::daemon::api
