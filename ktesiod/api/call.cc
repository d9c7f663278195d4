#include "api/call.h"

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"
#include "ktesio/v1/common.pb.h"

namespace ktesio::daemon::api {

namespace reason = contract::reason;

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) {
    return grpc::Status::OK;
  }
  v1::ErrorDetail detail;
  std::string why = contract::ErrorReason(status);
  detail.set_reason(why.empty() ? std::string(reason::kInternal) : why);
  detail.set_message(std::string(status.message()));
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()),
                      detail.SerializeAsString());
}

absl::StatusOr<uid_t> Authorize(const ApiContext& api, grpc::CallbackServerContext* ctx) {
  std::optional<server::PeerCredentials> peer = api.peers->Lookup(ctx->peer());
  if (!peer.has_value()) {
    return contract::MakeError(absl::StatusCode::kPermissionDenied, reason::kPermissionDenied,
                               "caller credentials unknown; connect through the daemon's socket");
  }
  if (!api.policy.Allows(*peer)) {
    api.logger->warn("denied uid={} gid={} pid={}", peer->uid, peer->gid, peer->pid);
    return contract::MakeError(
        absl::StatusCode::kPermissionDenied, reason::kPermissionDenied,
        absl::StrCat("uid ", peer->uid, " may not use this daemon (allowed: root, uid ",
                     api.policy.owner_uid,
                     api.policy.group.has_value() ? absl::StrCat(", group ", *api.policy.group)
                                                  : std::string(),
                     ")"));
  }
  return peer->uid;
}

void Finish(grpc::CallbackServerContext* ctx, grpc::ServerUnaryReactor* reactor,
            const absl::Status& status) {
  if (!status.ok()) {
    std::string why = contract::ErrorReason(status);
    ctx->AddTrailingMetadata("ktesio-reason", why.empty() ? std::string(reason::kInternal) : why);
  }
  reactor->Finish(ToGrpcStatus(status));
}

grpc::ServerUnaryReactor* Unimplemented(grpc::CallbackServerContext* ctx, std::string_view what) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  Finish(ctx, reactor,
         contract::MakeError(
             absl::StatusCode::kUnimplemented, reason::kUnimplemented,
             absl::StrCat(std::string(what), " is not implemented in this ktesiod build")));
  return reactor;
}

}  // namespace ktesio::daemon::api
