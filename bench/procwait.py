#!/usr/bin/env python3
"""Timing helper of bench/compare.sh: starts a command and measures, by polling /proc or a log
file, how long until its effect is visible. It never waits for the command itself (a daemon
keeps running, a CLI may return before or after the effect), so every supervisor is timed the
same way: from the exec of the command to the observable result.

  procwait.py procs N CMDLINE -- COMMAND...    until N processes have exactly CMDLINE
  procwait.py log DIR MARKER -- COMMAND...     until a file in DIR ends with a line holding MARKER
  procwait.py restart CMDLINE REPS GAP_S       SIGKILL one CMDLINE process REPS times; each time
                                               until a new one exists; GAP_S seconds between
  procwait.py restart-exact CMDLINE REPS GAP_S as restart, timed by the kernel instead of by
                                               polling: from the killed process's exit to the
                                               exec of its replacement, both as the kernel's
                                               process-event connector stamps them (root only)

Prints seconds (procs, log) or one millisecond figure per repetition (restart). Exits 1 after
TIMEOUT_S (environment, default 120) seconds without the result.
"""
import os
import signal
import socket
import struct
import subprocess
import sys
import time

TIMEOUT_S = float(os.environ.get("TIMEOUT_S", "120"))


def cmdline_pids(cmdline):
    """Pids whose argv, joined with spaces, equals cmdline (zombies have an empty cmdline)."""
    want = cmdline.encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry.name, "rb") as f:
                raw = f.read()
        except OSError:
            continue
        if raw.rstrip(b"\0").replace(b"\0", b" ") == want:
            found.append(int(entry.name))
    return found


def spawn(command):
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def wait_until(done):
    """Polls done() until true. Between polls it sleeps as long as the last poll took (at least
    1 ms), so that scanning /proc with thousands of processes never takes more than half a core
    from what is being measured; the resolution stays within that poll time."""
    start = time.monotonic()
    while True:
        before = time.monotonic()
        if done():
            return
        took = time.monotonic() - before
        if time.monotonic() - start > TIMEOUT_S:
            sys.exit("procwait: timed out after %.0f s" % TIMEOUT_S)
        time.sleep(max(0.001, took))


def split_command(args):
    if "--" not in args:
        sys.exit("procwait: missing -- COMMAND")
    i = args.index("--")
    return args[:i], args[i + 1:]


def ends_with_marker(directory, marker):
    try:
        names = os.listdir(directory)
    except OSError:
        return False
    for name in names:
        try:
            with open(os.path.join(directory, name), "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 512))
                if marker in f.read():
                    return True
        except OSError:
            continue
    return False


# The kernel's process-event connector (linux/cn_proc.h): every fork, exec and exit on the
# machine, each stamped with CLOCK_MONOTONIC in nanoseconds at the moment it happened. Polling
# /proc resolves a restart only to the time one scan takes (several milliseconds with a few
# hundred processes); these stamps resolve it to the microsecond, for every supervisor alike.
NETLINK_CONNECTOR, CN_IDX_PROC, CN_VAL_PROC = 11, 1, 1
PROC_CN_MCAST_LISTEN, NLMSG_DONE = 1, 3
PROC_EVENT_EXEC, PROC_EVENT_EXIT = 0x00000002, 0x80000000


def proc_events():
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
    sock.bind((0, CN_IDX_PROC))
    op = struct.pack("=I", PROC_CN_MCAST_LISTEN)
    cn_msg = struct.pack("=IIIIHH", CN_IDX_PROC, CN_VAL_PROC, 0, 0, len(op), 0) + op
    sock.send(struct.pack("=IHHII", 16 + len(cn_msg), NLMSG_DONE, 0, 0, 0) + cn_msg)
    sock.settimeout(TIMEOUT_S)
    return sock


def next_event(sock):
    """(what, timestamp_ns, tgid) of the next exec or exit event."""
    while True:
        data = sock.recv(65536)
        # nlmsghdr (16) + cn_msg (20) + proc_event: what, cpu, timestamp_ns, then the event
        what, _, stamp = struct.unpack_from("=IIQ", data, 36)
        if what in (PROC_EVENT_EXEC, PROC_EVENT_EXIT):
            _, tgid = struct.unpack_from("=ii", data, 52)
            return what, stamp, tgid


def restart_exact(cmdline, reps, gap):
    sock = proc_events()
    want = cmdline.encode()
    for _ in range(reps):
        time.sleep(gap)
        before = cmdline_pids(cmdline)
        if not before:
            sys.exit("procwait: no process with cmdline %r" % cmdline)
        victim, died = before[0], None
        os.kill(victim, signal.SIGKILL)
        while True:
            what, stamp, tgid = next_event(sock)
            if what == PROC_EVENT_EXIT and tgid == victim:
                died = stamp
            elif what == PROC_EVENT_EXEC and died is not None and tgid not in before:
                try:
                    with open("/proc/%d/cmdline" % tgid, "rb") as f:
                        raw = f.read()
                except OSError:
                    continue
                if raw.rstrip(b"\0").replace(b"\0", b" ") == want:
                    print("%.3f" % ((stamp - died) / 1e6))
                    break


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "procs":
        (count, cmdline), command = split_command(args)
        t0 = time.monotonic()
        spawn(command)
        wait_until(lambda: len(cmdline_pids(cmdline)) >= int(count))
        print("%.3f" % (time.monotonic() - t0))
    elif mode == "log":
        (directory, marker), command = split_command(args)
        t0 = time.monotonic()
        spawn(command)
        wait_until(lambda: ends_with_marker(directory, marker.encode()))
        print("%.3f" % (time.monotonic() - t0))
    elif mode == "restart":
        cmdline, reps, gap = args[0], int(args[1]), float(args[2])
        for _ in range(reps):
            time.sleep(gap)
            before = cmdline_pids(cmdline)
            if not before:
                sys.exit("procwait: no process with cmdline %r" % cmdline)
            t0 = time.monotonic()
            os.kill(before[0], signal.SIGKILL)
            wait_until(lambda: any(p not in before for p in cmdline_pids(cmdline)))
            print("%.1f" % ((time.monotonic() - t0) * 1000))
    elif mode == "restart-exact":
        restart_exact(args[0], int(args[1]), float(args[2]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
