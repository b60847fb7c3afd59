#!/bin/bash
# Automatic threads against -t 2 and -t 1, interleaved, beside nothing, beside a loop that spins half
# of every 20 ms, and beside one that spins all the time (docs/performance.md, "Other work on the
# machine"). Prints one line a run: what ran, the threads it started on, whether they followed the
# load, the fewest it ran on, tokens per second.
#   bash scripts/threads_beside_load.sh > lines.txt
P="Write a short story about a robot."
loop() { python -c "
import sys, time
duty = float(sys.argv[1])
while True:
    t = time.perf_counter()
    while time.perf_counter() - t < 0.02 * duty: pass
    time.sleep(0.02 * (1 - duty) + 1e-9)" "$1"; }
gen() {
  local label=$1; shift
  timeout 300 tandem generate "$@" -p "$P" --temp 0 --json 2>/dev/null | python -c "
import sys, json; d = json.load(sys.stdin); s = d['samples'][0]['stats']
print('$label', d['settings']['threads'], 'follow' if d['settings']['threads_follow_load'] else 'fixed',
      'fewest', s['threads'], round(s['tokens_per_s'], 1), 'tok/s')"
}
for load in idle 1.0 0.5; do
  if [ $load != idle ]; then loop $load & B=$!; sleep 1; fi
  for rep in 1 2; do
    for t in auto 2 1; do
      T=""; [ $t != auto ] && T="-t $t"
      gen "load=$load test t=$t" -m smollm2-135m -n 128 $T
      gen "load=$load demo-target t=$t" -m qwen2.5-coder-1.5b -n 48 $T
      [ $load != 0.5 ] && gen "load=$load demo-pair-auto t=$t" -m qwen2.5-coder-1.5b -md qwen2.5-coder-0.5b --auto -n 48 $T
    done
  done
  [ $load != idle ] && kill $B
done
