# SPDX-License-Identifier: MIT
# Plots of one bench/run.sh results directory. Usage: gnuplot -e "dir='RESULTS_DIR'" bench/plots.gp
if (!exists("dir")) dir = "."

set terminal pngcairo size 1100,600 font ",11" noenhanced
set grid

# Throughput against the number of workers, with the raw ceiling of the same server.
set output dir."/throughput.png"
set title "zkd no-op (echo) tasks/s against workers; dashed: raw creates/s, same server"
set logscale y
set xlabel "zkd run worker processes"
set ylabel "tasks/s (log scale)"
set xtics (1, 2, 4)
set xrange [0.8:4.2]
set yrange [1000:*]
set key outside right center box
plot dir."/throughput.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f5fbf" title "burst, fsync", \
     ""                   using 1:3 with linespoints lw 2 pt 5 lc rgb "#6fa0e8" title "closed loop, fsync", \
     ""                   using 1:4 with lines dt 2 lw 2 lc rgb "#1f5fbf" title "raw creates/s, fsync", \
     ""                   using 1:5 with linespoints lw 2 pt 7 lc rgb "#d0601a" title "burst, forceSync=no", \
     ""                   using 1:6 with linespoints lw 2 pt 5 lc rgb "#f0a060" title "closed loop, forceSync=no", \
     ""                   using 1:7 with lines dt 2 lw 2 lc rgb "#d0601a" title "raw creates/s, forceSync=no", \
     ""                   using 1:8 with linespoints lw 3 pt 9 lc rgb "#0a3a80" title "bundles of 64, fsync", \
     ""                   using 1:9 with linespoints lw 3 pt 9 lc rgb "#a04000" title "bundles of 64, forceSync=no"
unset logscale y

# Latency CDF of the open loop at half the measured maximum, each configuration.
set output dir."/latency_cdf.png"
set title "submit -> result latency, open loop at 50% of max (CDF)"
set xlabel "latency (ms, log scale)"
set ylabel "fraction of tasks"
set logscale x
unset xrange
set xtics auto
set yrange [0:1]
set key bottom right inside
plot for [i=1:3] dir."/fsync/w".word("1 2 4",i)."/open.cdf" using 1:2 with lines lw 2 \
         lc rgb word("#1f5fbf #4f8fdf #9fbfef",i) title "fsync, ".word("1 2 4",i)." worker(s)", \
     for [i=1:3] dir."/nosync/w".word("1 2 4",i)."/open.cdf" using 1:2 with lines lw 2 dt 2 \
         lc rgb word("#d0601a #e88a4a #f5b98a",i) title "forceSync=no, ".word("1 2 4",i)." worker(s)"
