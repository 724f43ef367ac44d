#!/usr/bin/env bash
# Pong runs of `launch.train_single` on a lent GPU machine (the `device` tool), side by side.
#
# The machine has Python 3.12 + jax 0.11 but no ale-py/gymnasium/ml-collections: carry their
# cp312 wheels in ./.whl (ignored by git; see BENCHMARKS.md for the download command).
#   start:  RUNS='s3ta=s3ta resnet=resnet_lstm' MAX_SECONDS=1380 bash benchmarks/device_pong.sh start 500
#   watch:  bash /tmp/repo/benchmarks/device_pong.sh watch 540     (again within 30 s of the last call)
# RUNS holds NAME=KIND[,--config.x=y,...] items; each starts one detached process (setsid, so it
# outlives the call) with NUM_ENVS (default 128; 0: the config's own count, e.g. 8 for
# experiments/ram_features.py's PPO) ALE envs on THREADS (default 4) threads, writing /tmp/runs/NAME,
# from CONFIG (default experiments/atari_expert.py; or e.g. experiments/atari_expert.py:tuned).
# `watch` prints every run's progress line once a minute for the given seconds (or until all
# have ended) and copies each run's log and metrics.jsonl to $OUT. With COPY_CHECKPOINTS=1 (at
# most 2 runs: $OUT takes 8 files of <= 16 MiB), `watch` also sends each run's latest checkpoint
# once all have ended, as NAME_ckpt.tgz.part_aa, _ab, ...; here:
# cat NAME_ckpt.tgz.part_* | tar xz -C WORKDIR/checkpoints
set -u
mode=${1:?start or watch}
seconds=${2:?seconds to watch}

copy_out() {  # every run's log and metrics to $OUT (each minute: a call cut short still returns them)
  for log in /tmp/runs/*.log; do
    local name; name=$(basename "$log" .log)
    cp "$log" "$OUT/$name.log"
    cp "/tmp/runs/$name/metrics.jsonl" "$OUT/${name}_metrics.jsonl" 2>/dev/null
  done
}

watch_runs() {
  local end=$(( $(date +%s) + $1 ))
  while [ "$(date +%s)" -lt "$end" ]; do
    sleep 60
    echo "== $(date +%T) GPU $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader)" \
         "load $(cut -d' ' -f1 /proc/loadavg)"
    for log in /tmp/runs/*.log; do echo "$(basename "$log" .log): $(grep -a '^frames' "$log" | tail -1)"; done
    copy_out
    pgrep -f launch.train_single >/dev/null || { echo 'no run left'; break; }
  done
  copy_out
  for log in /tmp/runs/*.log; do
    echo "--- $(basename "$log" .log)"; grep -a -v '^frames' "$log" | tail -15
  done
  if [ "${COPY_CHECKPOINTS:-0}" = 1 ] && ! pgrep -f launch.train_single >/dev/null; then
    for log in /tmp/runs/*.log; do
      local name ckpt; name=$(basename "$log" .log)
      ckpt=$(ls -d "/tmp/runs/$name"/checkpoints/ckpt_* 2>/dev/null | sort -t_ -k2 -n | tail -1)
      [ -n "$ckpt" ] || continue
      tar czf - -C "$(dirname "$ckpt")" "$(basename "$ckpt")" | split -b 15m - "$OUT/${name}_ckpt.tgz.part_"
      echo "checkpoint $ckpt -> $(ls "$OUT/${name}_ckpt.tgz.part_"* | wc -l) part(s)"
    done
  fi
}

if [ "$mode" = watch ]; then watch_runs "$seconds"; exit 0; fi
[ "$mode" = start ] || { echo "mode must be start or watch, got '$mode'" >&2; exit 2; }

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
# Run from a copy: a later call re-sends the working tree under the running processes.
rm -rf /tmp/repo && cp -r . /tmp/repo && cd /tmp/repo || exit 1
export PYTHONPATH=/tmp/site:/tmp/repo PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
python3 -c 'import jax, flax; print("jax", jax.__version__, "flax", flax.__version__, jax.devices())' || exit 1
mkdir -p /tmp/runs
num_runs=$(wc -w <<< "${RUNS:?NAME=KIND[,--config.x=y...] items}")
for spec in $RUNS; do
  name=${spec%%=*}
  IFS=, read -r -a parts <<< "${spec#*=}"
  XLA_PYTHON_CLIENT_MEM_FRACTION=$(python3 -c "print(round(0.9 / $num_runs, 2))") \
    setsid nohup python3 -m launch.train_single --config="${CONFIG:-experiments/atari_expert.py}" \
      --workdir="/tmp/runs/$name" --config.env.backend=ale --config.single_machine.device=gpu \
      --config.network.kind="${parts[0]}" --config.single_machine.num_envs="${NUM_ENVS:-128}" --config.env.num_threads="${THREADS:-4}" \
      --config.evaluator.period_s=120 --config.evaluator.num_episodes=8 --config.evaluator.num_envs=8 \
      --config.max_seconds="${MAX_SECONDS:-1380}" "${parts[@]:1}" \
      > "/tmp/runs/$name.log" 2>&1 < /dev/null &
done
sleep 5
watch_runs "$seconds"
