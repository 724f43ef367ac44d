"""Learner throughput: jitted `sgd_step` frames/s on whatever device JAX sees.

Pure JAX (no TF/Reverb/Launchpad), so it also runs on an accelerator machine that
lacks them. Defaults are the paper's: S3TA at Table 2 sizes on 210x160 RGB, 18
actions, unroll 50, batch 32. Frames count emulator frames (agent steps x action
repeat 4), as IMPALA does.

  python benchmarks/learner.py [--batch_size=32] [--unroll_length=50] [--dtype=bfloat16]
  python benchmarks/learner.py --kind=nature --observation_shape=84,84,4 --num_actions=6 \
      --batch_size=8 --unroll_length=20   # the fast baseline (experiments/atari_fast.py)
  python benchmarks/learner.py --batch_size=128 --remat --analyze_only   # memory and FLOPs
  python benchmarks/learner.py --count_flops --analyze_only   # the step's FLOPs counted in full
  python benchmarks/learner.py --algorithm=ppo --kind=gawrl --observation_shape=8,4,1 \
      --num_actions=6 --batch_size=8 --unroll_length=128   # 002/003's PPO update on Pong features
  python benchmarks/learner.py --algorithm=ppo --kind=gawrl --network_from=experiments/ram_features.py \
      --observation_shape=32,4,1 --num_actions=6 --batch_size=8 --unroll_length=128
      # the same with the experiment's own network and PPO settings (3 distractor games: 32 features)

Every run also reports XLA's own figures for the compiled step: its memory analysis
(temporary buffers = activations kept for the backward pass, arguments, outputs) and
the FLOP count of its cost analysis, from which MFU = FLOP/s / `--peak_tflops`; on a GPU also
the allocator's peak bytes in use over the whole process, compiles included (`device_peak_gib`:
an upper bound; on an H200 it stayed at 13.3 GiB with `--remat` where XLA's temporaries halved,
and was 52.4 GiB at B 128 with `--remat` against 26.4 GiB of temporaries), read three times to
tell what sets it: after the first compile, before anything ran (`device_peak_compile_gib`: what
the compile held, e.g. the autotuner's trials), after the first step (`device_peak_first_step_gib`: one execution)
and after the timed steps (`device_peak_gib`: steps dispatched back to back). XLA
counts a while loop's body once, so the scanned recurrent core enters that count for
one of its T + 1 steps: `xla_flops_per_step` (and the MFU from it) is a lower bound; the
ConvTorso, applied to all frames outside the loop, is counted in full. `--count_flops` counts
the step in full (`model_flops_per_step`, `full_flop_count` below: small lowerings with the
core's loop unrolled, counted before XLA optimises them, extrapolated; seconds, no compile) and
takes the MFU from that. XLA:GPU's count of the compiled step leaves out the convolutions, which it runs as cuDNN
calls (2 GFLOP for the paper's B 32 x T 50 step on an H200, XLA:CPU about 1.8 TFLOP), so on a
GPU no `xla_flops_per_step` is reported; the FLOPs are the program's, not the device's, so
`--count_flops` on any machine gives the count (paper size: 3.06 GFLOP per agent step), and
`model_flops_core_share`, the share spent in the core's T + 1 sequential steps (S3TA 0.65,
the ResNet-LSTM 0.002: the rest runs batched over all frames).
`--analyze_only` compiles without running, so it sizes configurations that do not fit.
With `--algorithm=ppo` a step is one PPO update of the [T + 1, B] rollout (PPOConfig's
defaults: 3 epochs x 4 minibatches of jitted steps, plus the pass that computes GAE), timed
only (its host loop has no single compiled function for XLA's figures).
"""

if __name__ == '__main__':  # first: re-executing now costs only the interpreter's start
  from launch import host_tuning  # pylint: disable=g-import-not-at-top
  host_tuning.reexec_with_host_tuning()  # glibc huge pages for XLA:CPU's buffers (host_tuning.py)

import argparse
import json
import os
import platform
import resource
import time

import jax
import jax.numpy as jnp
import numpy as np

from s3ta.learning import LearnerConfig, Trajectory, init_training_state, make_sgd_step, ppo
from s3ta.networks import NetworkConfig, make_network, parameter_count

ACTION_REPEAT = 4


def synthetic_batch(network, unroll_length: int, batch_size: int, seed: int = 0) -> Trajectory:
  """Random frames and actions with episode starts sprinkled in ([T + 1, B])."""
  rng = np.random.default_rng(seed)
  shape = (unroll_length + 1, batch_size)
  return Trajectory(
      observation=jnp.asarray(rng.integers(0, 256, shape + network.observation_shape, np.uint8)),
      prev_action=jnp.asarray(rng.integers(0, network.num_actions, shape), jnp.int32),
      prev_reward=jnp.asarray(rng.normal(size=shape), jnp.float32),
      is_first=jnp.asarray(rng.random(shape) < 0.01),
      action=jnp.asarray(rng.integers(0, network.num_actions, shape), jnp.int32),
      behaviour_logits=jnp.asarray(rng.normal(size=shape + (network.num_actions,)), jnp.float32),
      reward=jnp.asarray(rng.normal(size=shape), jnp.float32),
      discount=jnp.asarray(rng.random(shape) > 0.01, jnp.float32),
      initial_state=network.initial_state(batch_size))


def device_peak_gib() -> float | None:
  """The allocator's peak bytes in use so far on the first device, GiB; None on XLA:CPU."""
  stats = jax.devices()[0].memory_stats() or {}
  return round(stats['peak_bytes_in_use'] / 2**30, 2) if 'peak_bytes_in_use' in stats else None


def lower_sgd_step(network, config, unroll_length: int, batch_size: int):
  """`sgd_step` lowered for abstract state and batch of these sizes (nothing allocated)."""
  state = jax.eval_shape(lambda: init_training_state(network, config, jax.random.PRNGKey(0)))
  batch = jax.eval_shape(lambda: synthetic_batch(network, unroll_length, batch_size))
  return jax.jit(make_sgd_step(network, config, jit=False)).lower(state, batch)


def _cost_flops(cost) -> float | None:
  """The FLOPs of a cost analysis (a list of one dict on older JAX), or None."""
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return float(cost['flops']) if cost and 'flops' in cost else None


def xla_analysis(network, config, unroll_length: int, batch_size: int) -> dict:
  """XLA's memory and cost analysis of the compiled `sgd_step` (compiled, not run)."""
  start = time.perf_counter()
  compiled = lower_sgd_step(network, config, unroll_length, batch_size).compile()
  result = {'compile_s': round(time.perf_counter() - start, 2)}
  peak = device_peak_gib()  # nothing has run yet: what the compile itself held
  if peak is not None:
    result['device_peak_compile_gib'] = peak
  memory = compiled.memory_analysis()
  if memory is not None:
    for name in ('temp', 'argument', 'output'):
      result[f'xla_{name}_gib'] = round(getattr(memory, f'{name}_size_in_bytes') / 2**30, 3)
  if jax.devices()[0].platform == 'gpu':  # its count misses the convolutions: no MFU from it
    result['xla_flops_note'] = ('XLA:GPU cost analysis omits cuDNN convolutions; for FLOPs '
                                'and MFU pass --count_flops')
    return result
  flops = _cost_flops(compiled.cost_analysis())
  if flops is not None:
    result['xla_flops_per_step'] = flops  # loop bodies once: a lower bound
  return result


def traced_flops(network, config, unroll_length: int, batch_size: int) -> float:
  """XLA's count of the unoptimised `sgd_step` (a while loop's body once)."""
  flops = _cost_flops(lower_sgd_step(network, config, unroll_length, batch_size).cost_analysis())
  if flops is None:
    raise RuntimeError(f'XLA on {jax.default_backend()} reported no FLOPs for the traced step; '
                       '--count_flops needs a backend whose cost analysis has "flops" (cpu, gpu)')
  return flops


def flops_coefficients(settings: dict, config, num_actions: int, observation_shape, *,
                       unrolled: bool) -> tuple[float, float, float, float]:
  """XLA's count of the traced `sgd_step` as c0 + cT T + cB B + cTB T B, from T, B in {1, 2}.

  Every op is per frame ((T + 1) x B), per unroll (B), per step (T) or per update (the
  optimizer), so the count is bilinear in T and B and four lowerings fix it. `unrolled`: the
  core's scan unrolled (`scan_unroll` = T + 1: no loop left, every step counted); else as it
  runs, a loop whose body XLA counts once. Counted on the unoptimised HLO (no compile: seconds,
  and on any backend with the convolutions in), so fusion's duplicated elementwise ops are not
  counted; `remat` off (model FLOPs, recomputation not counted).
  """
  counts = {}
  for t in (1, 2):
    for b in (1, 2):
      network = make_network(NetworkConfig.from_dict(
          dict(settings, remat=False, scan_unroll=t + 1 if unrolled else 1)), num_actions,
                             observation_shape)
      counts[t, b] = traced_flops(network, config, t, b)
  per_step_and_unroll = counts[2, 2] - counts[2, 1] - counts[1, 2] + counts[1, 1]
  per_step = counts[2, 1] - counts[1, 1] - per_step_and_unroll
  per_unroll = counts[1, 2] - counts[1, 1] - per_step_and_unroll
  per_update = counts[1, 1] - per_step - per_unroll - per_step_and_unroll
  return per_update, per_step, per_unroll, per_step_and_unroll


def full_flop_count(settings: dict, config, num_actions: int, observation_shape,
                    unroll_length: int, batch_size: int) -> dict:
  """The step's FLOPs with the recurrent core's T + 1 steps counted in full, and their share.

  `model_flops_per_step`: the unrolled count at T, B. `model_flops_core_share`: the share of it
  in the core's T + 1 sequential steps (forward and backward); the rest (torso, loss,
  optimizer) runs batched over all frames. A core step's FLOPs are how much faster the full
  count grows with T than the looped one (whose loop body enters once whatever T), which holds
  whatever constant either count adds at the loop's ends (newer JAX drops the last step's dead
  work when unrolled). Still counted once in both: the V-trace recursion's loop, a few FLOPs
  per step.
  """
  c0, c_t, c_b, c_tb = flops_coefficients(settings, config, num_actions, observation_shape,
                                          unrolled=True)
  _, looped_t, _, looped_tb = flops_coefficients(settings, config, num_actions, observation_shape,
                                                 unrolled=False)
  total = c0 + c_t * unroll_length + c_b * batch_size + c_tb * unroll_length * batch_size
  core_step = (c_t - looped_t) + (c_tb - looped_tb) * batch_size
  return dict(model_flops_per_step=total,
              model_flops_core_share=(unroll_length + 1) * core_step / total)


def run(kind: str, batch_size: int, unroll_length: int, steps: int, dtype: str,
        observation_shape=(210, 160, 3), num_actions: int = 18, remat: bool = False,
        analyze_only: bool = False, peak_tflops: float = 0.0, algorithm: str = 'impala',
        experiment=None, count_flops: bool = False, scan_unroll: int = 1) -> dict:
  """`experiment`: an experiment's ConfigDict whose network (kind, dtype, remat and scan_unroll
  replaced) and PPO settings are used instead of the defaults."""
  settings = dict(experiment.network.to_dict() if experiment else {}, kind=kind, dtype=dtype,
                  remat=remat, scan_unroll=scan_unroll)
  network = make_network(NetworkConfig.from_dict(settings), num_actions, observation_shape)
  header = {'algorithm': algorithm, 'kind': kind, 'dtype': dtype, 'remat': remat,
            'scan_unroll': scan_unroll, 'batch_size': batch_size, 'unroll_length': unroll_length,
            'device': str(jax.devices()[0]),
            'glibc_tunables': os.environ.get('GLIBC_TUNABLES', '')}  # launch/host_tuning.py
  if algorithm == 'ppo':
    config = ppo.PPOConfig.from_dict((experiment.get('ppo') if experiment else None) or {})
    if batch_size % config.num_minibatches:
      raise ValueError(f'--batch_size ({batch_size}) must be a multiple of PPO\'s '
                       f'{config.num_minibatches} minibatches.')
    if analyze_only or count_flops:
      raise ValueError('--analyze_only and --count_flops size the IMPALA sgd_step; PPO updates '
                       'run a host loop of jitted minibatch steps (use --algorithm=impala).')
    analysis = {}
    state = ppo.init_training_state(network, config, jax.random.PRNGKey(0))
    sgd_step = ppo.make_ppo_update(network, config)
  else:
    config = LearnerConfig()
    analysis = xla_analysis(network, config, unroll_length, batch_size)
    if count_flops:
      counts = full_flop_count(settings, config, num_actions, observation_shape, unroll_length,
                               batch_size)
      analysis['model_flops_per_step'] = counts['model_flops_per_step']
      analysis['model_flops_core_share'] = round(counts['model_flops_core_share'], 4)
    if analyze_only:
      return dict(header, **analysis)
    state = init_training_state(network, config, jax.random.PRNGKey(0))
    sgd_step = make_sgd_step(network, config)
  batch = jax.device_put(synthetic_batch(network, unroll_length, batch_size))
  start = time.perf_counter()
  state, metrics = sgd_step(state, batch)
  jax.block_until_ready((state, metrics))
  compile_s = time.perf_counter() - start
  peak_first_step = device_peak_gib()
  faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
  start = time.perf_counter()
  for _ in range(steps):
    state, metrics = sgd_step(state, batch)
  jax.block_until_ready((state, metrics))
  seconds = (time.perf_counter() - start) / steps
  faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) // steps
  agent_steps = unroll_length * batch_size
  result = dict(
      header, **analysis, parameters=parameter_count(state.params), platform=platform.machine(),
      compile_and_first_step_s=round(compile_s, 2), seconds_per_step=round(seconds, 4),
      agent_steps_per_s=round(agent_steps / seconds, 1),
      frames_per_s=round(ACTION_REPEAT * agent_steps / seconds, 1),
      minor_page_faults_per_step=faults,  # host pages touched anew (launch/host_tuning.py)
      finite_loss=bool(np.isfinite(float(metrics['loss']))))
  if peak_first_step is not None:  # the allocator's own figures (GPU/TPU; not XLA:CPU)
    result['device_peak_first_step_gib'] = peak_first_step
    result['device_peak_gib'] = device_peak_gib()
  flops = analysis.get('model_flops_per_step', analysis.get('xla_flops_per_step'))
  if flops is not None:  # the full count where there is one, else XLA's lower bound
    result['tflop_per_s'] = round(flops / seconds / 1e12, 3)
    if peak_tflops > 0:
      result['mfu'] = round(result['tflop_per_s'] / peak_tflops, 4)
  return result


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--algorithm', default='impala', choices=['impala', 'ppo'],
                      help="impala: one V-trace sgd_step; ppo: one PPO update (002's epochs and minibatches)")
  parser.add_argument('--kind', default='s3ta')
  parser.add_argument('--batch_size', type=int, default=32)
  parser.add_argument('--unroll_length', type=int, default=50)
  parser.add_argument('--steps', type=int, default=5, help='timed steps after the first')
  parser.add_argument('--dtype', default='float32', choices=['float32', 'bfloat16'])
  parser.add_argument('--observation_shape', default='210,160,3',
                      help='H,W,C of the frames: 210,160,3 (RGB) or 84,84,4 (gray, 4 stacked)')
  parser.add_argument('--num_actions', type=int, default=18)
  parser.add_argument('--remat', action='store_true',
                      help='recompute core steps in the backward pass (NetworkConfig.remat)')
  parser.add_argument('--scan_unroll', type=int, default=1,
                      help="core steps per scan-loop iteration (NetworkConfig.scan_unroll)")
  parser.add_argument('--count_flops', action='store_true',
                      help='count the step\'s FLOPs in full (eight small lowerings, no compile)')
  parser.add_argument('--analyze_only', action='store_true',
                      help='only compile: XLA memory and FLOP figures, no timed steps')
  parser.add_argument('--network_from', default='',
                      help='path/to/experiment.py[:arg]: its network and PPO settings (kind, '
                           'dtype, remat and scan_unroll still from the flags)')
  parser.add_argument('--peak_tflops', type=float, default=0.0,
                      help='the device peak for MFU (e.g. H100 SXM dense bf16: 989)')
  args = parser.parse_args()
  for name in ('batch_size', 'unroll_length', 'steps', 'scan_unroll'):
    if getattr(args, name) < 1:
      parser.error(f'--{name} must be >= 1, got {getattr(args, name)}')
  try:
    shape = tuple(int(x) for x in args.observation_shape.split(','))
  except ValueError:
    shape = ()
  if len(shape) != 3 or min(shape) < 1:
    parser.error(f'--observation_shape must be three positive integers H,W,C, got '
                 f'{args.observation_shape!r}')
  if args.num_actions < 1:
    parser.error(f'--num_actions must be >= 1, got {args.num_actions}')
  try:
    experiment = None
    if args.network_from:  # imported here: it brings the environment packages
      from s3ta.analysis import parameter_counts  # pylint: disable=g-import-not-at-top
      experiment = parameter_counts.load_config(args.network_from)
    result = run(args.kind, args.batch_size, args.unroll_length, args.steps, args.dtype,
                 observation_shape=shape, num_actions=args.num_actions, remat=args.remat,
                 analyze_only=args.analyze_only, peak_tflops=args.peak_tflops,
                 algorithm=args.algorithm, experiment=experiment,
                 count_flops=args.count_flops, scan_unroll=args.scan_unroll)
  except ValueError as e:  # a bad combination of options: one line, exit 2
    parser.error(str(e))
  print(json.dumps(result))


if __name__ == '__main__':
  main()
