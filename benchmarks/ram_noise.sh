#!/usr/bin/env bash
# The noisy RAM-feature Pong runs of papers 002/003 on this machine, one core, one run after another.
#
#   bash benchmarks/ram_noise.sh RUNS_DIR CORE CONDITION:KIND:SEED [...]
#   e.g. bash benchmarks/ram_noise.sh /work/runs 0 dist3:gawrl:0 random32:gawrl:1
#
# CONDITION is one of
#   dist3     3 distractor games (003 Fig. 5, high noise), played by the clean CNN seed 2
#   dist1     1 distractor game (003 Fig. 5, low noise), the same player
#   random32  32 random features appended (002 Fig. 3, n = 32)
# KIND is a `network.kind` (gawrl, dawrl, mlp, cnn1d, acnn). Each run stops at 4.4 M frames and is
# resumable: the same command again continues every run from its latest checkpoint, and a run whose
# log's summary says it stopped at max_frames is skipped (a resume would only evaluate it again).
# Each writes RUNS_DIR/CONDITION_KIND_sSEED and logs to RUNS_DIR/logs/CONDITION_KIND_sSEED.log.
#
# The distractor games' player is made first if RUNS_DIR/clean_cnn_s2 has not finished: the clean
# CNN seed 2 (BENCHMARKS.md, "the CNN and a-CNN baselines tie g-AWRL"; 15-35 minutes of a core).
# A lock lets a copy on the other core wait for it instead of training it twice.
#
# The runs use XLA:CPU's older runtime (XLA_FLAGS below, a jax 0.5 flag that newer XLA rejects):
# g-AWRL's PPO update is 1.3-1.45x faster there (BENCHMARKS.md, "XLA:CPU's large buffers").
# `touch RUNS_DIR/queue_STOP` stops the queue before its next run; SIGTERM to a run saves a
# checkpoint first (about a minute for g-AWRL).
set -u
usage="usage: $0 RUNS_DIR CORE CONDITION:KIND:SEED [...] (CONDITION: dist3, dist1 or random32)"
[ $# -ge 3 ] || { echo "$usage" >&2; exit 2; }
runs=$1 core=$2
shift 2
for item in "$@"; do
  IFS=: read -r condition kind seed <<< "$item"
  case $condition in dist3|dist1|random32) ;; *)
    echo "unknown condition '$condition' in '$item'; allowed: dist3, dist1, random32" >&2; exit 2;; esac
  [[ $kind =~ ^[a-z0-9_]+$ && $seed =~ ^[0-9]+$ ]] || {
    echo "bad item '$item': want CONDITION:KIND:SEED with a network kind and an integer seed" >&2; exit 2; }
done
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$runs/logs"
python=${PYTHON:-.venv/bin/python}
export XLA_FLAGS=${XLA_FLAGS:---xla_cpu_use_thunk_runtime=false}

finished() {  # LOG: the run's summary says it stopped at max_frames
  grep -Eq 'stop reason +max_frames' "$1" 2>/dev/null
}

train() {  # CONFIG WORKDIR LOG ARGS...: one resumable run of the single-machine trainer on this core
  local config=$1 workdir=$2 log=$3
  shift 3
  taskset -c "$core" "$python" -m launch.train_single --config="$config" --workdir="$workdir" \
      --config.max_frames=4400000 "$@" >> "$log" 2>&1
}

distractor=$runs/clean_cnn_s2
if [[ " $* " == *" dist"* ]]; then
  (
    flock 9
    finished "$runs/logs/clean_cnn_s2.log" && exit 0
    train experiments/ram_features.py "$distractor" "$runs/logs/clean_cnn_s2.log" \
        --config.network.kind=cnn1d --config.seed=2 --config.env.feature_shuffle_seed=2 \
        --config.max_seconds=14400
  ) 9> "$runs/clean_cnn_s2.lock" || {
    echo "the distractor player failed: $runs/logs/clean_cnn_s2.log" >&2; exit 1; }
fi

for item in "$@"; do
  IFS=: read -r condition kind seed <<< "$item"
  [ -e "$runs/queue_STOP" ] && { echo "queue_STOP: stopping before $item"; exit 0; }
  name=${condition}_${kind}_s${seed}
  finished "$runs/logs/$name.log" && { echo "$name: finished, skipped"; continue; }
  case $condition in
    dist*) config=experiments/ram_features.py
           noise=(--config.env.distractors="${condition#dist}" --config.env.distractor_policy=checkpoint
                  --config.env.distractor_checkpoint="$distractor");;
    random32) config=experiments/ram_features.py:Pong,32 noise=();;
  esac
  # max_seconds counts learner time over resumes: 40000 s leaves room for g-AWRL's 4-6 hours.
  train "$config" "$runs/$name" "$runs/logs/$name.log" --config.network.kind="$kind" \
      --config.seed="$seed" --config.env.feature_shuffle_seed="$seed" "${noise[@]}" \
      --config.max_seconds=40000 || echo "$name exited non-zero: $runs/logs/$name.log" >&2
done
