#pragma once

// ktctl's command table and dispatcher. Each command declares its arguments once (cli/args.h);
// the dispatcher parses them, and the command calls the API with a deadline, renders, and returns
// an exit code (docs/exit-codes.md). `--help`, the completions and the man page read the same
// table.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/args.h"
#include "cli/client.h"
#include "cli/exit_codes.h"

namespace ktesio::cli {

struct Command;

struct Context {
  GlobalOptions global;
  std::string socket_path;
  // Connects on first use and performs the API handshake; on failure reports and returns null.
  Client* Connect(int* exit_code);
  // Reports a failed call (stderr or the JSON error document); returns its exit code.
  int Fail(const grpc::Status& status);
  int Fail(const CallError& error);
  // One unary call with the default deadline, connecting first. Returns kExitOk, or the exit code
  // of the failure it reported.
  template <typename Stub, typename Request, typename Response>
  int Call(Stub& (Client::*service)(),
           grpc::Status (Stub::*rpc)(grpc::ClientContext*, const Request&, Response*),
           const Request& request, Response* response) {
    int code = kExitOk;
    Client* client = Connect(&code);
    if (client == nullptr) {
      return code;
    }
    std::unique_ptr<grpc::ClientContext> call = client->NewContext();
    const grpc::Status status = ((client->*service)().*rpc)(call.get(), request, response);
    return status.ok() ? kExitOk : Fail(status);
  }
  // Reports a usage error of the running command: the message and the command's usage line.
  int Usage(std::string_view message);
  const Command* command = nullptr;  // the command being run

 private:
  std::unique_ptr<Client> client_;
};

struct Command {
  std::vector<std::string_view> path;  // e.g. {"agent", "register"}
  std::string_view summary;            // one line for --help and the man page
  std::vector<Arg> args;               // operands and flags, in usage order
  std::function<int(Context&, const LocalArgs&)> run;

  std::string Name() const;   // "agent register"
  std::string Usage() const;  // "agent register NAME (--manifest DIR_OR_FILE | --kind BUILTIN)"
  std::string Help() const;   // the usage line, the summary and one line per argument
};

// Every ktctl command, in help order.
const std::vector<Command>& Commands();

// Runs ktctl with argv (without argv[0]); returns the exit code.
int RunCli(const std::vector<std::string>& args);

// Command groups registered by their own files.
void AddDaemonCommands(std::vector<Command>& commands);
void AddAgentCommands(std::vector<Command>& commands);
void AddManifestCommands(std::vector<Command>& commands);
void AddConfigCommands(std::vector<Command>& commands);
void AddObserveCommands(std::vector<Command>& commands);
void AddCompletionCommands(std::vector<Command>& commands);
void AddTopCommands(std::vector<Command>& commands);
void AddFleetCommands(std::vector<Command>& commands);

}  // namespace ktesio::cli
