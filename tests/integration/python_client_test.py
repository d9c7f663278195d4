#!/usr/bin/python3
"""Any language can drive ktesiod: generate Python stubs from proto/ with protoc's Python and
gRPC plugins, start a real daemon, and call it from Python (Debian's python3-grpcio)."""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    for flag in ("--protoc", "--grpc-plugin", "--proto-dir", "--ktesiod", "--work"):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()

    gen = os.path.join(args.work, "gen")
    shutil.rmtree(gen, ignore_errors=True)
    os.makedirs(gen)
    protos = sorted(
        os.path.join("ktesio/v1", name)
        for name in os.listdir(os.path.join(args.proto_dir, "ktesio/v1"))
        if name.endswith(".proto"))
    subprocess.run([args.protoc, "-I", args.proto_dir, f"--python_out={gen}",
                    f"--grpc_out={gen}", f"--plugin=protoc-gen-grpc={args.grpc_plugin}",
                    *protos], check=True)
    sys.path.insert(0, gen)

    import grpc  # noqa: E402
    from ktesio.v1 import agent_pb2, agent_pb2_grpc, system_pb2, system_pb2_grpc  # noqa: E402

    tmp = tempfile.mkdtemp(prefix="kt-py-", dir="/tmp")
    sock = os.path.join(tmp, "d.sock")
    log = open(os.path.join(tmp, "ktesiod.log"), "w")
    daemon = subprocess.Popen([args.ktesiod, "--state-dir", os.path.join(tmp, "state"),
                               "--socket", sock], stdout=log, stderr=log)
    try:
        deadline = time.time() + 10
        while True:
            try:
                probe = socket.socket(socket.AF_UNIX)
                probe.connect(sock)
                probe.close()
                break
            except OSError:
                if time.time() > deadline or daemon.poll() is not None:
                    print(open(os.path.join(tmp, "ktesiod.log")).read())
                    raise SystemExit("daemon did not come up")
                time.sleep(0.02)

        channel = grpc.insecure_channel(f"unix:{sock}")
        system = system_pb2_grpc.SystemServiceStub(channel)
        version = system.GetVersion(system_pb2.GetVersionRequest(), timeout=5)
        assert version.api_major == 1, version
        assert version.contract_version == "1.0.0", version
        status = system.GetStatus(system_pb2.GetStatusRequest(), timeout=5)
        assert status.socket_path == sock, status
        assert status.pid == daemon.pid, status

        agents = agent_pb2_grpc.AgentServiceStub(channel)
        reply = agents.RegisterAgent(
            agent_pb2.RegisterAgentRequest(name="from-python", builtin_kind="mock"), timeout=5)
        assert reply.instance.name == "from-python", reply
        listing = agents.ListAgents(agent_pb2.ListAgentsRequest(), timeout=5)
        assert [i.name for i in listing.instances] == ["from-python"], listing

        # Errors carry the stable reason in the trailing metadata.
        try:
            agents.GetAgent(agent_pb2.GetAgentRequest(name="missing"), timeout=5)
            raise SystemExit("expected NOT_FOUND")
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.NOT_FOUND, error
            trailers = dict(error.trailing_metadata())
            assert trailers.get("ktesio-reason") == "NOT_FOUND", trailers
        print("python client: ok")
        return 0
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
