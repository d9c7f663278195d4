#include "api/call.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"
#include "ktesio/v1/common.pb.h"

namespace ktesio::daemon::api {

namespace reason = contract::reason;

namespace {

// What `message` costs in a status's trailers: once as grpc-message, percent-encoded (every byte
// outside printable ASCII, and '%', takes three), once inside the ErrorDetail, base64-encoded.
size_t TrailerCost(std::string_view message) {
  size_t encoded = 0;
  for (const char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    encoded += byte < 0x20 || byte > 0x7e || byte == '%' ? 3 : 1;
  }
  return encoded + (message.size() + 2) / 3 * 4;
}

// The longest prefix of `text` no longer than `size` bytes that does not split a UTF-8 sequence.
std::string_view Utf8Prefix(std::string_view text, size_t size) {
  if (size >= text.size()) {
    return text;
  }
  while (size > 0 && (static_cast<unsigned char>(text[size]) & 0xc0) == 0x80) {
    --size;
  }
  return text.substr(0, size);
}

}  // namespace

std::string FitStatusMessage(std::string_view message, size_t budget) {
  if (TrailerCost(message) <= budget) {
    return std::string(message);
  }
  const size_t lines = static_cast<size_t>(std::count(message.begin(), message.end(), '\n')) + 1;
  // Whole lines while they fit, then how many were left out. The last line never fits here:
  // the whole message did not.
  const auto more = [&](size_t left_out) {
    return absl::StrCat("\n... ", left_out, left_out == 1 ? " more line" : " more lines",
                        " not shown (",
                        absl::string_view(kStatusCutNote.data(), kStatusCutNote.size()), ")");
  };
  size_t end = 0;  // the kept prefix is message[0, end)
  size_t kept = 0;
  while (kept + 1 < lines) {
    const size_t next = message.find('\n', kept == 0 ? 0 : end + 1);
    if (TrailerCost(message.substr(0, next)) + TrailerCost(more(lines - kept - 1)) > budget) {
      break;
    }
    end = next;
    ++kept;
  }
  if (kept > 0) {
    return std::string(message.substr(0, end)) + more(lines - kept);
  }
  // Not even the first line fits (with the count of the others): cut it.
  const std::string tail =
      lines > 1 ? " ..." + more(lines - 1) : " ... (" + std::string(kStatusCutNote) + ")";
  size_t size = std::min(message.find('\n'), message.size());
  while (size > 0 && TrailerCost(Utf8Prefix(message, size)) + TrailerCost(tail) > budget) {
    size = size > 64 ? size - size / 8 : size - 1;
  }
  return std::string(Utf8Prefix(message, size)) + tail;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) {
    return grpc::Status::OK;
  }
  const std::string message =
      FitStatusMessage(std::string_view(status.message().data(), status.message().size()));
  v1::ErrorDetail detail;
  std::string why = contract::ErrorReason(status);
  detail.set_reason(why.empty() ? std::string(reason::kInternal) : why);
  detail.set_message(message);
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), message,
                      detail.SerializeAsString());
}

absl::StatusOr<uid_t> Authorize(const ApiContext& api, grpc::CallbackServerContext* ctx,
                                std::optional<uid_t>* refused_uid) {
  std::optional<server::PeerCredentials> peer = api.peers->Lookup(ctx->peer());
  if (!peer.has_value()) {
    return contract::MakeError(absl::StatusCode::kPermissionDenied, reason::kPermissionDenied,
                               "caller credentials unknown; connect through the daemon's socket");
  }
  if (!api.policy.Allows(*peer)) {
    api.logger->warn("denied uid={} gid={} pid={}", peer->uid, peer->gid, peer->pid);
    if (refused_uid != nullptr) {
      *refused_uid = peer->uid;
    }
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

void AuditRefused(ApiContext& api, uid_t uid, std::string_view rpc, std::string instance,
                  const absl::Status& refusal) {
  api.engine->Post([engine = api.engine, uid, rpc, instance = std::move(instance), refusal] {
    engine->Audit(uid, rpc, instance, refusal);
  });
}

grpc::Status WithReason(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  if (!status.ok()) {
    std::string why = contract::ErrorReason(status);
    ctx->AddTrailingMetadata("ktesio-reason", why.empty() ? std::string(reason::kInternal) : why);
  }
  return ToGrpcStatus(status);
}

void Finish(grpc::CallbackServerContext* ctx, grpc::ServerUnaryReactor* reactor,
            const absl::Status& status) {
  reactor->Finish(WithReason(ctx, status));
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
