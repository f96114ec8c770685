#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Groups the slow results of a zkd-loadgen --trace file into stalls, and matches them with
# ZooKeeper's GC pauses (a JVM log with utctime decorations, optional).
# Usage: analyze.py TRACE [GC_LOG] [--slow MS]
import datetime, gzip, re, sys
args = [a for a in sys.argv[1:] if not a.startswith('--')]
slow = float(sys.argv[sys.argv.index('--slow') + 1]) if '--slow' in sys.argv else 10.0
if '--slow' in sys.argv: args.remove(sys.argv[sys.argv.index('--slow') + 1])
rows = []
opener = gzip.open if args[0].endswith('.gz') else open
for line in opener(args[0], 'rt'):
    if line.startswith('#'): continue
    due, lat, st, fin, w = line.split()
    rows.append((float(due), float(lat), int(st), int(fin), w))
# The run's start on the wall clock: the earliest start minus its due time bounds it from above.
start_ms = min(r[2] - r[0] for r in rows if r[2] > 0)
bad = sorted(r for r in rows if r[1] > slow)
stalls = []
for r in bad:
    if stalls and r[0] - stalls[-1][-1][0] < 5: stalls[-1].append(r)
    else: stalls.append([r])
gcs = []
if len(args) > 1:
    for line in (gzip.open if args[1].endswith('.gz') else open)(args[1], 'rt'):
        m = re.match(r'\[(\S+)\] GC\(\d+\) Pause .* ([\d.]+)ms$', line.strip())
        if m:
            t = datetime.datetime.strptime(m.group(1)[:23], '%Y-%m-%dT%H:%M:%S.%f')
            gcs.append((t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000, float(m.group(2))))
near_gc = 0
for s in stalls:
    t0 = start_ms + s[0][0]
    if any(t0 - 15 <= g <= t0 + 15 for g, _ in gcs): near_gc += 1
n = len(rows)
print(f"{n} results, {len(bad)} over {slow:g} ms ({100.0 * len(bad) / n:.1f} %), in {len(stalls)} groups "
      f"(results due within 5 ms of each other); the largest {max((len(s) for s in stalls), default=0)} results; "
      f"{sum(1 for s in stalls if len(s) == 1)} alone")
if gcs:
    print(f"ZooKeeper GC pauses: {len(gcs)}, {min(g[1] for g in gcs):.1f}-{max(g[1] for g in gcs):.1f} ms; "
          f"groups starting within 15 ms of one: {near_gc} of {len(stalls)}")
