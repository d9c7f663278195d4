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
        # Streamed calls' errors carry the reason trailer too (exit-codes.md: every non-OK status).
        from ktesio.v1 import events_pb2, events_pb2_grpc, logs_pb2, logs_pb2_grpc  # noqa: E402
        streams = [
            lambda: events_pb2_grpc.EventServiceStub(channel).SubscribeEvents(
                events_pb2.SubscribeEventsRequest(since_cursor=2**63), timeout=5),
            lambda: logs_pb2_grpc.LogServiceStub(channel).FollowLogs(
                logs_pb2.FollowLogsRequest(filter=logs_pb2.LogFilter(name="missing")), timeout=5),
        ]
        for open_stream, reason in zip(streams, ("INVALID_ARGUMENT", "NOT_FOUND")):
            try:
                for _ in open_stream():
                    pass
                raise SystemExit(f"expected {reason} from a stream")
            except grpc.RpcError as error:
                trailers = dict(error.trailing_metadata() or ())
                assert trailers.get("ktesio-reason") == reason, (error, trailers)

        # A stop window the stops would refuse is refused before any step applies (the adoption
        # of "from-python" into fleet "t2" came before its stop, and was applied).
        from ktesio.v1 import fleet_pb2, fleet_pb2_grpc  # noqa: E402
        fleet = fleet_pb2_grpc.FleetServiceStub(channel)
        spec = fleet_pb2.FleetSpec(name="t2", instances=[fleet_pb2.FleetInstanceSpec(
            name="from-python", builtin_kind="mock", state=fleet_pb2.DESIRED_STATE_STOPPED)])
        try:
            fleet.Apply(fleet_pb2.ApplyFleetRequest(fleets=[spec], timeout_seconds=4294967295),
                        timeout=10)
            raise SystemExit("expected INVALID_ARGUMENT for a 4294967295 s stop window")
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
            assert "stop window of 4294967295 s" in error.details(), error.details()
        shown = agents.GetAgent(agent_pb2.GetAgentRequest(name="from-python"), timeout=5)
        assert "ktesio.io/fleet" not in shown.instance.labels, shown.instance.labels

        # A mutating call from a uid the policy refuses is answered PERMISSION_DENIED and still
        # audited with that uid (product.md §12). Root only: the caller must be another uid.
        if os.geteuid() == 0:
            os.chmod(tmp, 0o755)  # the file-system gate open: SO_PEERCRED is the check left
            os.chmod(sock, 0o666)
            # The stubs where the other uid can read them (the build tree may not be readable).
            stubs = os.path.join(tmp, "stubs")
            shutil.copytree(gen, stubs)
            for root, dirs, files in os.walk(stubs):
                for name in dirs + files:
                    os.chmod(os.path.join(root, name), 0o755)
            os.chmod(stubs, 0o755)
            child = ("import sys, grpc\n"
                     f"sys.path.insert(0, {stubs!r})\n"
                     "from ktesio.v1 import agent_pb2, agent_pb2_grpc\n"
                     f"stub = agent_pb2_grpc.AgentServiceStub(grpc.insecure_channel('unix:{sock}'))\n"
                     "try:\n"
                     "    stub.RemoveAgent(agent_pb2.RemoveAgentRequest(name='from-python',"
                     " force=True), timeout=5)\n"
                     "except grpc.RpcError as e:\n"
                     "    print(e.code().name)\n")
            refused = subprocess.run([sys.executable, "-c", child], capture_output=True,
                                     text=True, timeout=30, user=65534, group=65534,
                                     extra_groups=[], cwd="/")
            assert refused.stdout.strip() == "PERMISSION_DENIED", (refused.stdout, refused.stderr)
            listing = agents.ListAgents(agent_pb2.ListAgentsRequest(), timeout=5)
            assert [i.name for i in listing.instances] == ["from-python"], "nothing was removed"
            from ktesio.v1 import events_pb2, events_pb2_grpc  # noqa: E402
            events = events_pb2_grpc.EventServiceStub(channel)
            deadline = time.time() + 10
            found = None
            while found is None and time.time() < deadline:
                stream = events.SubscribeEvents(
                    events_pb2.SubscribeEventsRequest(since_cursor=0, audit=True), timeout=1)
                try:
                    for response in stream:
                        for event in response.events:
                            if '"uid":65534' in event.payload_json:
                                found = event
                except grpc.RpcError as error:
                    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED, error
            assert found is not None, "no audit record of the refused call"
            for part in ('"rpc":"RemoveAgent"', '"instance":"from-python"',
                         '"result":"PERMISSION_DENIED"'):
                assert part in found.payload_json, found.payload_json
            print("python client: a refused mutating call is audited")
        print("python client: ok")
        return 0
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
