#!/usr/bin/env bash
# Learner settings side by side on a lent GPU machine (the `device` tool): one process per
# setting of `benchmarks/learner.py`, one after another on the idle GPU, each line of JSON to
# $OUT/learner.jsonl (and stdout). Needs nothing carried: the machine's jax 0.11 runs the pure
# core with the V-trace stand-in.
#
#   SETTINGS='--scan_unroll=1;--scan_unroll=2;--scan_unroll=4;--scan_unroll=8' \
#     DEADLINE=560 bash benchmarks/device_learner.sh --count_flops --peak_tflops=495 --steps=5
#
# SETTINGS: ';'-separated flag groups, one process each; the arguments are added to every one.
# DEADLINE (seconds, default 560): no setting starts after it, and the one running is killed at
# it, so the call returns within the `device` tool's limit with every finished line kept.
set -u
cd "$(dirname "$0")/.." || exit 2
out=${OUT:-/tmp}
deadline=$(( $(date +%s) + ${DEADLINE:-560} ))
IFS=';' read -r -a settings <<< "${SETTINGS:?SETTINGS: ;-separated flag groups of benchmarks/learner.py}"
for setting in "${settings[@]}"; do
  left=$(( deadline - $(date +%s) ))
  [ "$left" -gt 10 ] || { echo "deadline reached before: $setting" | tee -a "$out/learner.jsonl"; break; }
  # shellcheck disable=SC2086  # a setting is several flags
  PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false timeout "$left" \
      "${PYTHON:-python3}" benchmarks/learner.py $setting "$@" 2> "$out/stderr_$(date +%s).txt" |
      grep '^{' | tee -a "$out/learner.jsonl"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || echo "{\"failed\": \"$setting\", \"rc\": $rc}" | tee -a "$out/learner.jsonl"
done
