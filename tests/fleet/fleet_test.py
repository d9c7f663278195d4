#!/usr/bin/python3
"""The fleet proof (docs/fleet.md): three real ktesiod daemons stand in for three hosts, each
with metrics on its own loopback port; a real Prometheus from Debian scrapes all three through
file_sd every second and evaluates the shipped rules; a real Alertmanager delivers to a loopback
webhook receiver. Agents of both metering sources run on the hosts, one crash-loops, one breaches
a budget. Asserted:

- PromQL fleet totals equal the sum of `ktctl agent list` totals over the three daemons, exactly;
- the crash-loop and budget-breach alerts reach the receiver;
- a daemon SIGKILLed and restarted keeps its ledger counters monotonic (no reset);
- every query of the shipped dashboard runs against this Prometheus without error.

Exit 77 (skipped) when prometheus or prometheus-alertmanager is not installed.
"""

import argparse
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

DEADLINE_S = 90


_HANDED_OUT = set()


def free_port() -> int:
    # A port is free once its probe socket is closed, so the kernel may offer the same one again
    # to the next probe: never hand one out twice (the daemons, Alertmanager and Prometheus are
    # all given theirs before any of them binds).
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def wait_for(what, fn, timeout=DEADLINE_S, interval=0.25):
    end = time.time() + timeout
    last = None
    while time.time() < end:
        try:
            last = fn()
            if last:
                return last
        except (OSError, ValueError, KeyError) as e:  # a server still starting, a partial answer
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


class Daemon:
    def __init__(self, args, root, name):
        self.args = args
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir)
        self.socket = os.path.join(self.dir, "d.sock")
        self.port = free_port()
        self.proc = None
        self.log = os.path.join(self.dir, "ktesiod.log")

    @property
    def target(self):
        return f"127.0.0.1:{self.port}"

    def start(self):
        env = dict(os.environ)
        env["PATH"] = os.path.dirname(self.args.probe) + ":" + env.get("PATH", "/usr/bin:/bin")
        self.proc = subprocess.Popen(
            [self.args.ktesiod, "--state-dir", os.path.join(self.dir, "state"), "--socket",
             self.socket, "--metrics-listen", self.target],
            stdout=open(self.log, "a"), stderr=subprocess.STDOUT, env=env)
        wait_for(f"{self.target} to answer", lambda: self.ctl("daemon", "status").returncode == 0)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.ctl("agent", "stop", "--all", "--timeout", "0")
            self.proc.terminate()
            self.proc.wait(timeout=20)

    def ctl(self, *argv):
        return subprocess.run([self.args.ktctl, "--socket", self.socket, *argv],
                              capture_output=True, text=True, timeout=60)

    def ok(self, *argv):
        r = self.ctl(*argv)
        if r.returncode != 0:
            raise AssertionError(f"ktctl {' '.join(argv)}: exit {r.returncode}: {r.stderr}")
        return r.stdout

    def register_probe(self, name, probe_args, settings=()):
        manifest = os.path.join(self.dir, "m-" + name)
        os.makedirs(manifest)
        with open(os.path.join(manifest, "adapter.toml"), "w") as f:
            f.write('contract_version = "1.0.0"\n[adapter]\nkind = "probe"\n'
                    f'[lifecycle.start]\nexec = "{self.args.probe}"\n'
                    f"args = {json.dumps(probe_args.split())}\n"
                    '[capabilities.pause]\nlinux = "guaranteed"\n'
                    '[metering]\nsource = "self-reported"\n')
        self.ok("agent", "register", name, "--manifest", manifest)
        for key, value in settings:
            self.ok("agent", "config", "set", name, key, value)

    def register_observed(self, name, upstream):
        manifest = os.path.join(self.dir, "m-" + name)
        os.makedirs(manifest)
        with open(os.path.join(manifest, "adapter.toml"), "w") as f:
            f.write('contract_version = "1.0.0"\n[adapter]\nkind = "metered"\n'
                    '[lifecycle.start]\nexec = "/usr/bin/python3"\n'
                    f'args = ["-u", "{self.args.metered_agent}"]\n'
                    'env = { HTTP_PROXY = "http://127.0.0.1:9" }\n'
                    '[capabilities.interaction]\nlinux = "guaranteed"\n'
                    '[metering]\nsource = "engine-observed"\n'
                    '[config."metering.base_url"]\nenv = "OPENAI_BASE_URL"\n')
        self.ok("agent", "register", name, "--manifest", manifest)
        self.ok("agent", "config", "set", name, "metering.upstream_base_url", upstream)

    def totals(self):
        doc = json.loads(self.ok("agent", "list", "--json"))
        return doc["totals"]["total_input_tokens"], doc["totals"]["total_output_tokens"]


class Receiver(http.server.ThreadingHTTPServer):
    """The Alertmanager webhook: keeps every alert it is sent."""

    def __init__(self):
        self.alerts = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    receiver.alerts.extend(json.loads(body).get("alerts", []))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    def names(self):
        with self.lock:
            return {(a["labels"].get("alertname"), a["labels"].get("agent")) for a in self.alerts}


def query(prom_port, expr, at=None):
    params = {"query": expr}
    if at is not None:
        params["time"] = str(at)
    url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as response:
        doc = json.load(response)
    if doc.get("status") != "success":
        raise AssertionError(f"query {expr!r} failed: {doc}")
    return doc["data"]["result"]


def scalar_by(result, label):
    return {r["metric"].get(label, ""): float(r["value"][1]) for r in result}


def main() -> int:
    parser = argparse.ArgumentParser()
    for flag in ("--ktesiod", "--ktctl", "--probe", "--provider", "--metered-agent", "--rules",
                 "--dashboard"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--prometheus", default="/usr/bin/prometheus")
    parser.add_argument("--alertmanager", default="/usr/bin/prometheus-alertmanager")
    args = parser.parse_args()
    for binary in (args.prometheus, args.alertmanager):
        if not os.access(binary, os.X_OK):
            print(f"SKIPPED: {binary} not installed (scripts/install-deps.sh installs it)")
            return 77

    root = tempfile.mkdtemp(prefix="kt-fleet-", dir="/tmp")
    procs = []
    daemons = [Daemon(args, root, f"host{i}") for i in (1, 2, 3)]
    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    ok = False
    try:
        provider = subprocess.Popen(
            [sys.executable, args.provider, "--ledger", os.path.join(root, "ledger.jsonl")],
            stdout=subprocess.PIPE, text=True)
        procs.append(provider)
        provider_port = int(provider.stdout.readline().split()[1])

        # Alertmanager delivering every alert to the receiver at once.
        am_port = free_port()
        with open(os.path.join(root, "am.yml"), "w") as f:
            f.write(f"""route:
  receiver: hook
  group_by: [alertname, instance, agent]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: http://127.0.0.1:{receiver.server_address[1]}/hook
""")
        procs.append(subprocess.Popen(
            [args.alertmanager, f"--config.file={root}/am.yml", f"--storage.path={root}/am",
             f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="],
            stdout=open(os.path.join(root, "am.log"), "w"), stderr=subprocess.STDOUT))

        for d in daemons:
            d.start()
        with open(os.path.join(root, "targets.json"), "w") as f:
            json.dump([{"targets": [d.target for d in daemons]}], f)
        prom_port = free_port()
        with open(os.path.join(root, "prometheus.yml"), "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ["{os.path.abspath(args.rules)}"]
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["127.0.0.1:{am_port}"]
scrape_configs:
  - job_name: ktesio
    file_sd_configs:
      - files: ["{root}/targets.json"]
        refresh_interval: 1s
""")
        procs.append(subprocess.Popen(
            [args.prometheus, f"--config.file={root}/prometheus.yml",
             f"--storage.tsdb.path={root}/tsdb", f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=open(os.path.join(root, "prometheus.log"), "w"), stderr=subprocess.STDOUT))

        # The agents: both metering sources, a crash loop, a budget breach.
        h1, h2, h3 = daemons
        h1.register_probe("s1", "--usage-lines 20 --usage-input 3 --usage-output 5 "
                          "--heartbeat-ms 60000")
        h1.register_observed("e1", f"http://127.0.0.1:{provider_port}/v1")
        h2.register_probe("s2", "--usage-lines 7 --usage-input 11 --usage-output 13 "
                          "--heartbeat-ms 60000")
        h2.register_probe("loop", "--crash-after-ms 400 --exit-code 3",
                          [("restart.max_consecutive", "2"), ("restart.backoff_initial_ms", "10")])
        h3.register_probe("b3", "--usage-lines 10 --usage-input 5 --usage-output 5 "
                          "--heartbeat-ms 60000",
                          [("budget.tokens.per_run", "50"), ("budget.breach_action", "pause")])
        h3.register_probe("s3", "--usage-lines 4 --usage-input 100 --usage-output 1 "
                          "--heartbeat-ms 60000")
        for d, names in ((h1, ["s1", "e1"]), (h2, ["s2", "loop"]), (h3, ["b3", "s3"])):
            for name in names:
                d.ok("agent", "start", name)
        for kind in ("chat", "chat-stream", "no-usage"):
            h1.ok("agent", "send", "e1", kind)

        # Fleet totals: once every ledger settled, PromQL equals the sum over the daemons.
        def settled():
            a = [d.totals() for d in daemons]
            time.sleep(0.5)
            b = [d.totals() for d in daemons]
            calls = json.loads(h1.ok("agent", "usage", "e1", "--json"))["usage"]
            return a == b and calls["unknown_usage_calls"] == 1 and \
                calls["cumulative_input_tokens"] > 0 and b
        totals = wait_for("the ledgers to settle", settled)
        expected = {"input": sum(t[0] for t in totals), "output": sum(t[1] for t in totals)}
        print(f"fleet: ktctl totals over three daemons: {expected}")

        def prom_totals():
            got = scalar_by(query(prom_port, "ktesio:fleet_tokens:total"), "direction")
            return got if got == {k: float(v) for k, v in expected.items()} else None
        wait_for("PromQL fleet totals to equal ktctl's", prom_totals)
        raw = scalar_by(query(prom_port, "sum by (direction) (ktesio_agent_tokens_total)"),
                        "direction")
        assert raw == {k: float(v) for k, v in expected.items()}, raw
        print("fleet: PromQL totals equal the sum of ktctl agent list totals, exactly")

        # The alerts reach the receiver through Alertmanager.
        wait_for("the crash-loop and budget alerts at the receiver", lambda: {
            ("KtesioAgentCrashLooping", "loop"), ("KtesioBudgetBreached", "b3")} <= receiver.names())
        print(f"fleet: alerts received: {sorted(receiver.names())}")

        # Every dashboard query runs.
        with open(args.dashboard) as f:
            dashboard = json.load(f)
        exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
        empty = [e for e in exprs if not query(prom_port, e)]
        print(f"fleet: {len(exprs)} dashboard queries ran, {len(exprs) - len(empty)} with data")

        # A daemon SIGKILLed and restarted: ledger counters continue, no reset.
        before = time.time()
        h1.kill()
        wait_for("Prometheus to see host1 down",
                 lambda: scalar_by(query(prom_port, f'up{{instance="{h1.target}"}}'), "job")
                 == {"ktesio": 0.0})
        h1.start()
        wait_for("host1's new daemon in Prometheus",
                 lambda: query(prom_port, 'changes(ktesio_daemon_start_time_seconds'
                                          f'{{instance="{h1.target}"}}[2m]) >= 1'))
        time.sleep(2.5)  # a few scrapes of the new daemon
        window = int(time.time() - before) + 5
        resets = query(prom_port, f'resets(ktesio_agent_tokens_total{{instance="{h1.target}"}}'
                                  f'[{window}s]) > 0')
        assert not resets, f"counters reset across the daemon restart: {resets}"
        calls_resets = query(prom_port, f'resets(ktesio_agent_model_calls_total'
                                        f'{{instance="{h1.target}"}}[{window}s]) > 0')
        assert not calls_resets, calls_resets
        assert scalar_by(query(prom_port, "ktesio:fleet_tokens:total"), "direction") == \
            {k: float(v) for k, v in expected.items()}
        print("fleet: a SIGKILLed and restarted daemon kept its counters monotonic")
        ok = True
        return 0
    finally:
        for d in daemons:
            try:
                d.stop()
            except Exception as e:  # noqa: BLE001 - report and keep cleaning up
                print(f"cleanup: {d.dir}: {e}")
        for p in procs:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        receiver.shutdown()
        if ok:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"fleet: FAILED; logs kept in {root}")
            for name in ("prometheus.log", "am.log"):
                path = os.path.join(root, name)
                if os.path.exists(path):
                    print(f"---- {name} (tail) ----")
                    print("".join(open(path).readlines()[-20:]))
            for d in daemons:
                print(f"---- {d.log} (tail) ----")
                print("".join(open(d.log).readlines()[-20:]) if os.path.exists(d.log) else "")


if __name__ == "__main__":
    sys.exit(main())
