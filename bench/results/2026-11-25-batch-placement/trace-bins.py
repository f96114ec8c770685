# Per 100 ms bin of a zkd-loadgen --trace file: the tasks over 10 ms, the worst latency, how
# late the handler started (start-lag: started - due, less the smallest) and how long the
# result took after the handler finished (result-lag). Usage: python3 trace-bins.py TRACE
import sys, collections, statistics
rows=[l.split() for l in open(sys.argv[1]) if l[0].isdigit()]
rows=[(float(r[0]), float(r[1]), int(r[2]), int(r[3])) for r in rows]
rows.sort()
base=min(s-d for d,l,s,f in rows if s)
bins=collections.defaultdict(list)
for d,l,s,f in rows: bins[int(d//100)].append((l, s-d-base, l-(f-d-base) if f else 0))
for b in sorted(bins):
    v=bins[b]; slow=[x for x in v if x[0]>10]
    if len(slow)>=15:
        print("t=%.1fs n_slow=%d max=%.0f  start-lag med %.0f max %.0f | result-lag (lat - finish) med %.0f max %.0f" % (b/10, len(slow), max(x[0] for x in v), statistics.median(x[1] for x in v), max(x[1] for x in v), statistics.median(x[2] for x in v), max(x[2] for x in v)))
