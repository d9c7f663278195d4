#include "api/follow_logs.h"

namespace ktesio::daemon::api {

FollowLogsReactor::FollowLogsReactor(ApiContext& api, grpc::CallbackServerContext* ctx,
                                     const v1::FollowLogsRequest& request)
    : api_(api), link_(std::make_shared<Link>()) {
  link_->reactor = this;
  absl::StatusOr<uid_t> uid = Authorize(api, ctx);
  if (!uid.ok()) {
    End(uid.status());
    return;
  }
  std::shared_ptr<Link> link = link_;
  v1::LogFilter filter = request.filter();
  api_.engine->Post([this, link, filter] {
    auto emit = [link](v1::FollowLogsResponse response) {
      std::lock_guard<std::mutex> lock(link->mu);
      if (link->reactor != nullptr) {
        link->reactor->Enqueue(std::move(response));
      }
    };
    auto end = [link](absl::Status status) {
      std::lock_guard<std::mutex> lock(link->mu);
      if (link->reactor != nullptr) {
        link->reactor->End(status);
      }
    };
    absl::StatusOr<uint64_t> id = api_.engine->StartFollow(filter, emit, end);
    if (!id.ok()) {
      end(id.status());
      return;
    }
    std::lock_guard<std::mutex> lock(link->mu);
    if (link->reactor != nullptr) {
      follow_id_ = *id;
    } else if (*id != 0) {
      api_.engine->StopFollow(*id);  // the client left before we got going
    }
  });
}

void FollowLogsReactor::Enqueue(v1::FollowLogsResponse response) {
  std::lock_guard<std::mutex> lock(mu_);
  if (final_.has_value()) {
    return;
  }
  queue_.push_back(std::move(response));
  if (!writing_) {
    writing_ = true;
    StartWrite(&queue_.front());
  }
}

void FollowLogsReactor::End(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (final_.has_value()) {
    return;
  }
  final_ = ToGrpcStatus(status);
  if (!writing_ && !finished_) {
    finished_ = true;
    Finish(*final_);
  }
}

void FollowLogsReactor::OnWriteDone(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.pop_front();
  if (!ok) {
    writing_ = false;
    if (!finished_) {
      finished_ = true;
      Finish(grpc::Status::CANCELLED);
    }
    return;
  }
  if (!queue_.empty()) {
    StartWrite(&queue_.front());
    return;
  }
  writing_ = false;
  if (final_.has_value() && !finished_) {
    finished_ = true;
    Finish(*final_);
  }
}

void FollowLogsReactor::OnCancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!final_.has_value()) {
      final_ = grpc::Status::CANCELLED;
    }
    if (!writing_ && !finished_) {
      finished_ = true;
      Finish(grpc::Status::CANCELLED);
    }
  }
}

void FollowLogsReactor::OnDone() {
  std::shared_ptr<Link> link = link_;
  {
    std::lock_guard<std::mutex> lock(link->mu);
    link->reactor = nullptr;
  }
  const uint64_t id = follow_id_;
  engine::Engine* engine = api_.engine;
  engine->Post([engine, link, id] {
    if (id != 0) {
      engine->StopFollow(id);
    }
  });
  delete this;
}

}  // namespace ktesio::daemon::api
