// ktctl daemon ...

#include "cli/app.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "cli/render.h"

namespace ktesio::cli {
namespace {

int DaemonStatus(Context& ctx, const std::vector<std::string>& args) {
  constexpr std::string_view kUsage = "daemon status";
  absl::StatusOr<LocalArgs> local = ParseLocal(args, {}, {}, 0, 0);
  if (!local.ok()) {
    return ctx.Usage(std::string(local.status().message()), kUsage);
  }
  int code = 0;
  Client* client = ctx.Connect(&code);
  if (client == nullptr) {
    return code;
  }
  v1::GetStatusResponse response;
  auto call = client->NewContext();
  grpc::Status status = client->system().GetStatus(call.get(), v1::GetStatusRequest(), &response);
  if (!status.ok()) {
    return ctx.Fail(status);
  }
  Out(ctx.global.json ? StatusDocument(response) : StatusText(response));
  return kExitOk;
}

}  // namespace

void AddDaemonCommands(std::vector<Command>& commands) {
  commands.push_back({{"daemon", "status"},
                      "",
                      "daemon version, API and contract versions, uptime, paths, instance counts",
                      DaemonStatus});
}

}  // namespace ktesio::cli
