#!/usr/bin/python3
"""The packaging_placement test: what can be verified here of the placement recipes without a
cluster or a container engine (docs/fleet.md says what is not run).

1. packaging/kubernetes/: every file parses as YAML; the DaemonSet has host-path state and socket
   dirs, resource requests, an exec liveness probe running `ktctl daemon status`, a grace period
   longer than the ordered full stop, and scrape annotations naming the port the daemon listens
   on; the PodMonitor sets job="ktesio" (what the shipped rules expect); the kustomization lists
   files that exist.
2. packaging/nomad/: a system job with the same port, host volumes and a long enough kill timeout
   (a structural check: there is no HCL parser in Debian).
3. packaging/container/: the Containerfile installs the project's .deb on Debian 12 under tini,
   and its entrypoint is run here for real with the build's binaries: a SIGKILLed ktesiod is
   started again while its agent keeps running (same pid, re-adopted), and SIGTERM runs the
   ordered full stop (the agent is stopped, then the daemon) and exits 0.
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

try:
    import yaml
except ImportError:  # another python3 first on PATH: Debian's has python3-yaml (install-deps)
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3", *sys.argv])
    raise

HERE = os.path.dirname(os.path.abspath(__file__))
STOP_WINDOW_S = 30 + 5  # stop_timeout_secs default + kill confirmation


def fail(message):
    raise AssertionError(message)


def wait_for(what, fn, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        value = fn()
        if value:
            return value
        time.sleep(0.1)
    fail(f"timed out waiting for {what}")


def check_kubernetes():
    kdir = os.path.join(HERE, "kubernetes")
    docs = {}
    for name in sorted(os.listdir(kdir)):
        if name.endswith(".yaml"):
            with open(os.path.join(kdir, name)) as f:
                docs[name] = yaml.safe_load(f)
    kustomization = docs.pop("kustomization.yaml")
    for resource in kustomization["resources"]:
        if resource not in docs:
            fail(f"kustomization lists {resource}, which does not exist")
    ds = docs["daemonset.yaml"]
    assert ds["kind"] == "DaemonSet", ds["kind"]
    spec = ds["spec"]["template"]["spec"]
    assert spec["terminationGracePeriodSeconds"] > STOP_WINDOW_S, "grace period too short"
    container = spec["containers"][0]
    probe = container["livenessProbe"]["exec"]["command"]
    assert probe[0] == "ktctl" and probe[-2:] == ["daemon", "status"], probe
    assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"]
    env = {e["name"]: e["value"] for e in container["env"]}
    port = int(env["KTESIO_METRICS_LISTEN"].rsplit(":", 1)[1])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == port, (ports, port)
    annotations = ds["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == port
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    host_paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    assert mounts["state"] == env["KTESIO_STATE_DIR"] and "state" in host_paths
    assert mounts["run"] == os.path.dirname(env["KTESIO_SOCKET"]) and "run" in host_paths
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    pm = docs["podmonitor.yaml"]
    assert pm["kind"] == "PodMonitor"
    relabel = pm["spec"]["podMetricsEndpoints"][0]["relabelings"]
    assert {"targetLabel": "job", "replacement": "ktesio"} in relabel, relabel
    config = docs["configmap.yaml"]["data"]["ktesiod.toml"]
    assert "version = 1" in config
    print(f"kubernetes: {len(docs) + 1} manifests parse; DaemonSet, PodMonitor and config agree "
          f"(metrics port {port})")
    return port


def check_nomad(port):
    with open(os.path.join(HERE, "nomad", "ktesio.nomad.hcl")) as f:
        text = f.read()
    code = re.sub(r"#.*", "", text)
    depth = 0
    for ch in code:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0, "unbalanced braces"
    assert depth == 0, "unbalanced braces"
    assert re.search(r'^\s*type\s*=\s*"system"', code, re.M), "not a system job"
    assert int(re.search(r"static\s*=\s*(\d+)", code).group(1)) == port
    assert re.search(rf'KTESIO_METRICS_LISTEN\s*=\s*"0\.0\.0\.0:{port}"', code)
    kill = int(re.search(r'kill_timeout\s*=\s*"(\d+)s"', code).group(1))
    assert kill > STOP_WINDOW_S, kill
    for volume in ("ktesio-state", "ktesio-run"):
        assert f'"{volume}"' in code, volume
    assert re.search(r'path\s*=\s*"/healthz"', code)
    print(f"nomad: system job, port {port}, kill_timeout {kill}s, host volumes, /healthz check")


def check_container(ktesiod, ktctl, probe):
    with open(os.path.join(HERE, "container", "Containerfile")) as f:
        containerfile = f.read()
    assert re.search(r"^FROM debian:12", containerfile, re.M)
    assert "/tmp/ktesio.deb" in containerfile and "tini" in containerfile
    assert re.search(r'^ENTRYPOINT \["/usr/bin/tini", "--", ', containerfile, re.M)

    tmp = tempfile.mkdtemp(prefix="kt-ct-", dir="/tmp")
    env = dict(os.environ, KTESIOD=ktesiod, KTCTL=ktctl, KTESIO_STATE_DIR=f"{tmp}/state",
               KTESIO_SOCKET=f"{tmp}/run/d.sock", KTESIO_METRICS_LISTEN="127.0.0.1:0",
               KTESIO_RESTART_DELAY="0.2")
    log = open(f"{tmp}/entrypoint.log", "w")
    entry = subprocess.Popen([os.path.join(HERE, "container", "entrypoint.sh")], env=env,
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def ctl(*argv):
        return subprocess.run([ktctl, *argv], env=env, capture_output=True, text=True, timeout=30)

    def show():
        r = ctl("agent", "show", "a", "--json")
        return json.loads(r.stdout)["instance"] if r.returncode == 0 else None

    def daemon_pid():
        r = ctl("daemon", "status", "--json")
        return json.loads(r.stdout)["pid"] if r.returncode == 0 else None

    try:
        first = wait_for("the daemon under the entrypoint", daemon_pid)
        os.makedirs(f"{tmp}/m")
        with open(f"{tmp}/m/adapter.toml", "w") as f:
            f.write(f'contract_version = "1.0.0"\n[adapter]\nkind = "probe"\n'
                    f'[lifecycle.start]\nexec = "{probe}"\nargs = ["--heartbeat-ms", "60000"]\n'
                    '[capabilities.pause]\nlinux = "guaranteed"\n'
                    '[metering]\nsource = "self-reported"\n')
        for argv in (("agent", "register", "a", "--manifest", f"{tmp}/m"), ("agent", "start", "a")):
            r = ctl(*argv)
            assert r.returncode == 0, f"ktctl {' '.join(argv)}: {r.stdout}{r.stderr}"
        agent_pid = show()["pid"]

        os.kill(first, signal.SIGKILL)
        second = wait_for("a new daemon", lambda: (p := daemon_pid()) and p != first and p)
        instance = wait_for("the agent re-adopted", lambda: (i := show()) and
                            i["state"] == "running" and i)
        assert instance["pid"] == agent_pid, "the agent did not survive the daemon's crash"
        print(f"container: ktesiod {first} SIGKILLed, {second} started by the entrypoint, "
              f"agent {agent_pid} kept running and was re-adopted")

        entry.send_signal(signal.SIGTERM)
        assert entry.wait(timeout=60) == 0, "the entrypoint did not exit 0 on SIGTERM"
        wait_for("the agent stopped", lambda: not os.path.exists(f"/proc/{agent_pid}"), 10)
        assert not os.path.exists(f"/proc/{second}"), "the daemon outlived the entrypoint"
        print("container: SIGTERM ran the ordered full stop (agent, then daemon) and exited 0")
    finally:
        if entry.poll() is None:
            os.killpg(entry.pid, signal.SIGKILL)
        log.close()
        subprocess.run(["pkill", "-KILL", "-f", tmp], check=False)


def main() -> int:
    ktesiod, ktctl, probe = (os.path.abspath(p) for p in sys.argv[1:4])
    port = check_kubernetes()
    check_nomad(port)
    check_container(ktesiod, ktctl, probe)
    print("packaging_placement: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
