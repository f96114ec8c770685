#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# ZooKeeper requests per task by client connection and op type, from a packet capture of
# the requests to the server's port (every frame of every packet: with zkco's cork one
# packet carries whole requests, several per packet):
#   tcpdump -i lo -n -s 0 -w cap.pcap "tcp dst port $PORT and tcp[tcpflags] & tcp-push != 0"
#   tcpdump -r cap.pcap -n -x | ops.py PORT TASKS
# TASKS: the tasks done during the capture (rate x seconds), the divisor. A frame that
# straddles two packets is lost (rare: requests are small); pings (op 11) are counted.
import collections
import re
import sys

port, tasks = sys.argv[1], float(sys.argv[2])
names = {1: "create", 2: "delete", 3: "exists", 4: "getData", 5: "setData", 8: "getChildren",
         9: "sync", 11: "ping", 12: "getChildren2", 14: "multi", 15: "create2",
         101: "closeSession"}
counts = collections.defaultdict(collections.Counter)
src, hexdump = None, ""


def flush():
    global src, hexdump
    if src:
        b = bytes.fromhex(hexdump)
        if len(b) > 40:
            ihl = (b[0] & 15) * 4
            payload = b[ihl + (b[ihl + 12] >> 4) * 4:]
            o = 0
            while o + 12 <= len(payload):
                length = int.from_bytes(payload[o:o + 4], "big")
                if length < 8 or length > 2_000_000:
                    break
                op = int.from_bytes(payload[o + 8:o + 12], "big", signed=True)
                counts[src][names.get(op, f"op{op}")] += 1
                o += 4 + length
    src, hexdump = None, ""


for line in sys.stdin:
    if not line.startswith("\t"):
        flush()
        m = re.search(r" IP 127\.0\.0\.1\.(\d+) > 127\.0\.0\.1\.(\d+):", line)
        if m and m.group(2) == port:
            src = m.group(1)
    elif src:
        hexdump += "".join(line.split(":", 1)[1].split()[:8])
flush()
total = collections.Counter()
for client, c in sorted(counts.items(), key=lambda kv: -sum(kv[1].values())):
    n = sum(c.values())
    if n >= 50:
        print(f"port {client}: {n / tasks:.2f}/task:",
              ", ".join(f"{k} {v / tasks:.3f}" for k, v in c.most_common()))
    total.update(c)
print(f"all: {sum(total.values()) / tasks:.2f}/task:",
      ", ".join(f"{k} {v / tasks:.3f}" for k, v in total.most_common()))
