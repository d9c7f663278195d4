#!/usr/bin/env python3
"""Where a process's memory is: its PSS (KiB) summed per mapping (library, binary, [heap],
[anon], stacks), largest first. Used to find what the daemon's footprint is made of.

  bench/pss_map.py PID [TOP]
"""
import collections
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    pid, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20
    pss = collections.Counter()
    dirty = collections.Counter()
    current = None
    with open("/proc/%s/smaps" % pid) as smaps:
        for line in smaps:
            fields = line.split()
            if not fields[0].endswith(":"):  # a mapping's header: "start-end perms off dev inode [name]"
                current = fields[5] if len(fields) > 5 else "[anon]"
            elif fields[0] == "Pss:":
                pss[current] += int(fields[1])
            elif fields[0] == "Private_Dirty:":
                dirty[current] += int(fields[1])
    print("%8s %8s  %s" % ("pss_kib", "dirty", "mapping"))
    print("%8d %8d  total" % (sum(pss.values()), sum(dirty.values())))
    for name, kib in pss.most_common(top):
        print("%8d %8d  %s" % (kib, dirty[name], name))


if __name__ == "__main__":
    main()
