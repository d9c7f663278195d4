#!/usr/bin/env python3
"""An agent that keeps its CPU busy after sending each call, then reads the answer.

usage: busy_client.py PROXY_URL SPIN_MS N

Measures the cost of the metering proxy's SCHED_BATCH policy (docs/metering.md "Scheduling") in
its worst case: the proxy is woken on the CPU of an agent that does not go to sleep after its
write. Prints, over N JSON calls to PROXY_URL/chat/completions (a proxy URL with its /kt-... path,
the provider behind it answering at once, e.g. `ktesio_proxy_bench upstream`), how long the agent
still waited for the answer once its SPIN_MS of work was done: near zero when the call went
through the proxy and the provider meanwhile.
"""
import socket
import sys
import time
from urllib.parse import urlparse


def main():
    url = urlparse(sys.argv[1])
    spin = float(sys.argv[2]) / 1000
    n = int(sys.argv[3])
    conn = socket.create_connection((url.hostname, url.port))
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    body = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
    request = (f"POST {url.path}/chat/completions HTTP/1.1\r\nHost: x\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    waits = []
    for _ in range(n):
        start = time.perf_counter()
        conn.sendall(request + body)
        while time.perf_counter() - start < spin:
            pass
        done_spinning = time.perf_counter()
        data = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                sys.exit("connection closed")
            data += chunk
            head_end = data.find(b"\r\n\r\n")
            if head_end < 0:
                continue
            lengths = [line for line in data[:head_end].split(b"\r\n")
                       if line.lower().startswith(b"content-length:")]
            if len(data) >= head_end + 4 + int(lengths[0].split(b":")[1]):
                break
        waits.append((time.perf_counter() - done_spinning) * 1e6)
    waits.sort()
    print(f"spin_ms {sys.argv[2]} wait_after_spin_p50_us {waits[len(waits) // 2]:.0f} "
          f"p90_us {waits[int(len(waits) * 0.9)]:.0f} max_us {waits[-1]:.0f}")


if __name__ == "__main__":
    main()
