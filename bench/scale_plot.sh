#!/usr/bin/env bash
# Plots the scale curve measured by bench/scale.sh: times (left) and memory (right) against the
# number of agents, both axes logarithmic, with a dotted "linear" guide through the first point
# of start-all so that anything growing faster than linearly stands out. Writes an SVG.
#
#   bench/scale_plot.sh [DATA] [OUT]    defaults: build/bench-scale.dat docs/img/scale.svg
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${1:-build/bench-scale.dat}
OUT=${2:-docs/img/scale.svg}
command -v gnuplot >/dev/null ||
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null
[[ -s $DATA ]] || { echo "no data in $DATA: run bench/scale.sh first" >&2; exit 1; }
mkdir -p "$(dirname "$OUT")"
# The linear guide: start_all_s of the smallest size, scaled by the agent count.
read -r n0 s0 < <(awk '!/^#/ {print $1, $3; exit}' "$DATA")
gnuplot <<GP
set terminal svg size 1000,420 dynamic font "sans,11"
set output "$OUT"
set multiplot layout 1,2 title "Ktesio at 100, 1,000 and 5,000 agents (bench/scale.sh, one 2-core VM)"
set logscale xy
set key top left
set grid
set xlabel "agents"
set ylabel "seconds"
set title "whole-command times"
plot "$DATA" using 1:3 with linespoints title "start --all (all exist)", \
     "" using 1:2 with linespoints title "apply (register)", \
     "" using 1:11 with linespoints title "stop --all", \
     "" using 1:(\$4/1000) with linespoints title "list --json", \
     "" using 1:(\$6/1000) with linespoints title "events replay from 0", \
     "" using 1:(\$5/1000) with linespoints title "show one agent", \
     "" using 1:($s0*\$1/$n0) with lines dashtype 3 lc rgb "gray" title "linear"
set ylabel "MiB"
set title "memory (PSS) with every agent running"
plot "$DATA" using 1:9 with linespoints title "daemon", \
     "" using 1:10 with linespoints title "daemon + shims"
unset multiplot
GP
echo "wrote $OUT"
