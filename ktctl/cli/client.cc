#include "cli/client.h"

#include "absl/strings/str_cat.h"
#include "cli/exit_codes.h"
#include "ktesio/v1/common.pb.h"
#include "ktesio/v1/version.h"

namespace ktesio::cli {

CallError ToCallError(const grpc::Status& status, const std::string& socket_path) {
  CallError error;
  v1::ErrorDetail detail;
  if (!status.error_details().empty() && detail.ParseFromString(status.error_details())) {
    error.reason = detail.reason();
  }
  error.message = status.error_message();
  if (error.reason.empty()) {
    switch (status.error_code()) {
      case grpc::StatusCode::UNAVAILABLE:
        error.reason = "DAEMON_UNREACHABLE";
        error.message = absl::StrCat(
            "cannot reach ktesiod at ", socket_path, " (", status.error_message(),
            "); start it with `ktesiod` (or `systemctl start ktesiod`), or point --socket / "
            "KTESIO_SOCKET at a running daemon");
        break;
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        error.reason = "TIMED_OUT";
        error.message = "the daemon did not answer before the deadline (--timeout)";
        break;
      case grpc::StatusCode::UNIMPLEMENTED:
        error.reason = "UNIMPLEMENTED";
        break;
      default:
        error.reason = "INTERNAL";
    }
  }
  error.exit_code = ExitCodeFor(error.reason, status.error_code());
  return error;
}

Client::Client(std::string socket_path, std::chrono::milliseconds timeout)
    : socket_path_(std::move(socket_path)), timeout_(timeout) {
  grpc::ChannelArguments args;
  // One local connection; no retries across a daemon that is not there.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  // Retained logs can be tens of MiB (logs.keep x logs.max_bytes) in one ReadLogs answer or the
  // first FollowLogs message; the daemon is local and trusted, so take any size.
  args.SetMaxReceiveMessageSize(-1);
  channel_ =
      grpc::CreateCustomChannel("unix:" + socket_path_, grpc::InsecureChannelCredentials(), args);
  system_ = v1::SystemService::NewStub(channel_);
  agents_ = v1::AgentService::NewStub(channel_);
  logs_ = v1::LogService::NewStub(channel_);
  config_ = v1::ConfigService::NewStub(channel_);
  secrets_ = v1::SecretService::NewStub(channel_);
  events_ = v1::EventService::NewStub(channel_);
  fleet_ = v1::FleetService::NewStub(channel_);
}

std::unique_ptr<grpc::ClientContext> Client::NewContext() const { return NewContext(timeout_); }

std::unique_ptr<grpc::ClientContext> Client::NewContext(std::chrono::milliseconds timeout) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
  return ctx;
}

bool Client::Handshake(v1::GetVersionResponse* version, CallError* error) {
  v1::GetVersionRequest request;
  request.set_client_api_version(std::string(v1::kApiVersion));
  std::unique_ptr<grpc::ClientContext> ctx = NewContext();
  grpc::Status status = system_->GetVersion(ctx.get(), request, version);
  if (!status.ok()) {
    *error = ToCallError(status, socket_path_);
    return false;
  }
  if (version->api_major() != v1::kApiMajor) {
    error->reason = "API_MISMATCH";
    error->message =
        absl::StrCat("ktesiod at ", socket_path_, " speaks API ", version->api_version(),
                     " but this ktctl speaks ", std::string(v1::kApiVersion),
                     "; use a ktctl of the same major version");
    error->exit_code = kExitUnreachable;
    return false;
  }
  return true;
}

}  // namespace ktesio::cli
