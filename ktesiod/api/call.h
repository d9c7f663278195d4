#pragma once

// The plumbing every RPC handler shares: peer authorization, posting the work to the engine's
// owner thread, the audit record (log line and event) for mutating calls, and the absl::Status ->
// grpc::Status mapping with the stable reason in the error details and the `ktesio-reason` trailer.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "engine/engine.h"
#include "grpcpp/grpcpp.h"
#include "ktesio/contract/error.h"
#include "ktesio/v1/config.pb.h"
#include "server/listener.h"
#include "spdlog/logger.h"

namespace ktesio::daemon::api {

struct ApiContext {
  engine::Engine* engine = nullptr;
  server::PeerTable* peers = nullptr;
  server::AccessPolicy policy;
  std::shared_ptr<spdlog::logger> logger;
};

// Maps a status to gRPC: same code (the numbering is shared), message, and the serialized
// ktesio.v1.ErrorDetail as binary error details. The message goes through FitStatusMessage.
grpc::Status ToGrpcStatus(const absl::Status& status);

// ToGrpcStatus, and for a non-OK status the stable reason in the `ktesio-reason` trailer of
// `ctx`'s call (INTERNAL when it carries none). Call before the call finishes.
grpc::Status WithReason(grpc::CallbackServerContext* ctx, const absl::Status& status);

// gRPC carries a status's message twice in the trailers (grpc-message, and the ErrorDetail in
// grpc-status-details-bin), and a client refuses trailers over its metadata limit (8 KiB unless
// it raised it), reporting only "received initial metadata size exceeds limit". A message whose
// two encodings would cost more than `budget` bytes is cut: whole lines while they fit, then
// "... N more lines not shown (...)"; a single line too long is cut inside (never within a UTF-8
// sequence).
inline constexpr size_t kStatusMessageBudget = 6144;
inline constexpr std::string_view kStatusCutNote =
    "the message is longer than a gRPC status carries";
std::string FitStatusMessage(std::string_view message, size_t budget = kStatusMessageBudget);

// Authorizes the caller. Returns the peer's uid, or an error status to answer with; then
// `*refused_uid` (when given) holds the uid of a known peer the policy refused.
absl::StatusOr<uid_t> Authorize(const ApiContext& api, grpc::CallbackServerContext* ctx,
                                std::optional<uid_t>* refused_uid = nullptr);

// The audit record of a mutating call the policy refused (product.md §12: every mutating call is
// audited with its caller's uid), written on the engine thread; the answer does not wait for it.
void AuditRefused(ApiContext& api, uid_t uid, std::string_view rpc, std::string instance,
                  const absl::Status& refusal);

// Adds the reason trailer (when any) and finishes `reactor` with `status`.
void Finish(grpc::CallbackServerContext* ctx, grpc::ServerUnaryReactor* reactor,
            const absl::Status& status);

// The Agent Instance a mutating request acts on, for the audit trail: the request's `name`, except
// for the secret RPCs, whose `name` names a secret, not an instance.
template <typename Request>
std::string AuditedInstance(const Request& request) {
  if constexpr (std::is_same_v<Request, v1::SetSecretRequest> ||
                std::is_same_v<Request, v1::RemoveSecretRequest>) {
    return std::string();
  } else if constexpr (requires { request.name(); }) {
    return request.name();
  } else {
    return std::string();
  }
}

// Handles a unary RPC on the engine thread: authorize, run `fn(request, response)` there, log an
// audit record for mutating calls, finish. `fn` returns absl::Status.
template <typename Request, typename Response, typename Fn>
grpc::ServerUnaryReactor* RunUnary(ApiContext& api, grpc::CallbackServerContext* ctx,
                                   const Request* request, Response* response, std::string_view rpc,
                                   bool mutating, Fn fn) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::optional<uid_t> refused;
  absl::StatusOr<uid_t> uid = Authorize(api, ctx, &refused);
  if (!uid.ok()) {
    if (mutating && refused.has_value()) {
      AuditRefused(api, *refused, rpc, AuditedInstance(*request), uid.status());
    }
    Finish(ctx, reactor, uid.status());
    return reactor;
  }
  api.engine->Post([&api, ctx, reactor, request, response, rpc, mutating, uid = *uid,
                    fn = std::move(fn)]() mutable {
    absl::Status status = fn(*request, response);
    if (mutating) {
      api.engine->Audit(uid, rpc, AuditedInstance(*request), status);
    }
    Finish(ctx, reactor, status);
  });
  return reactor;
}

// As RunUnary for commands that complete later: `fn(request, response, finish)` runs on the
// engine thread and calls `finish(status)` exactly once, possibly from a later event.
template <typename Request, typename Response, typename Fn>
grpc::ServerUnaryReactor* RunUnaryAsync(ApiContext& api, grpc::CallbackServerContext* ctx,
                                        const Request* request, Response* response,
                                        std::string_view rpc, Fn fn) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::optional<uid_t> refused;
  absl::StatusOr<uid_t> uid = Authorize(api, ctx, &refused);
  if (!uid.ok()) {
    if (refused.has_value()) {
      AuditRefused(api, *refused, rpc, AuditedInstance(*request), uid.status());
    }
    Finish(ctx, reactor, uid.status());
    return reactor;
  }
  api.engine->Post(
      [&api, ctx, reactor, request, response, rpc, uid = *uid, fn = std::move(fn)]() mutable {
        fn(*request, response, [&api, ctx, reactor, request, rpc, uid](absl::Status status) {
          api.engine->Audit(uid, rpc, AuditedInstance(*request), status);
          Finish(ctx, reactor, status);
        });
      });
  return reactor;
}

// Answers UNIMPLEMENTED naming the capability this build does not have yet.
grpc::ServerUnaryReactor* Unimplemented(grpc::CallbackServerContext* ctx, std::string_view what);

}  // namespace ktesio::daemon::api
