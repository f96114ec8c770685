#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# How long each ZooKeeper client takes to react: for every client connection, the time from
# a packet the server sent it (a reply or a watch event) to the next request it sent, grouped
# by (client port, server packet size, request size), medians in microseconds. Input: the
# text of `tcpdump -r CAP -n -tt`, from a capture of the server's port with PSH set, e.g.
#   tcpdump -i lo -n -tt -s 200 -w cap.pcap "tcp port $PORT and tcp[tcpflags] & tcp-push != 0"
#   tcpdump -r cap.pcap -n -tt | reactions.py PORT
# With one task at a time the pairs read as the task's hops: a master's watch event (51 B)
# then its get (32 B), its get's reply then its T2 multi, a worker's event then its get, ...
# The C client sends a request as two packets (4 length bytes, then the body); the 4-byte
# ones are skipped.
import collections
import statistics
import sys

port = sys.argv[1]
last = {}
gaps = collections.defaultdict(list)
for line in sys.stdin:
    f = line.split()
    if len(f) < 5 or not f[-1].isdigit():
        continue
    t, src, dst, size = float(f[0]), f[2], f[4].rstrip(":"), int(f[-1])
    if src.endswith("." + port):
        last[dst.rsplit(".", 1)[1]] = (t, size)
    elif size != 4:
        client = src.rsplit(".", 1)[1]
        if client in last:
            sent_t, sent_size = last.pop(client)
            gaps[(client, sent_size, size)].append((t - sent_t) * 1e6)
for (client, got, sent), v in sorted(gaps.items(), key=lambda kv: -len(kv[1])):
    if len(v) >= 5:
        print(f"port {client}: {got} B from the server -> {sent} B request: "
              f"{len(v)} times, median {statistics.median(v):.0f} us")
