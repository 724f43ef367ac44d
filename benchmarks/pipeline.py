"""Throughput of each pipeline stage and of the whole distributed program, on one config.

  python -m benchmarks.pipeline --config=experiments/smoke.py --workdir=/tmp/s3ta_bench

Measures, in this order and on the same config:
  (a) EnvPool only: num_actors x env.num_envs emulators in one batch, random actions;
  (b) actor policy inference: the CPU-jitted `select_action` on one actor's batch
      (env.num_envs frames per call), i.e. what one actor process can infer;
  (c) learner: the jitted `sgd_step` on [T + 1, B] batches on the best JAX device;
  (d) end to end: `python -m launch.train` on the config, once per `--inference` mode
      (policy in the actors, or on a central inference node); frames per second
      consumed by the learner in steady state (after its first metrics record: start-up
      and compile excluded), plus the actors' generated frames per second.
and prints pipeline efficiency = (d) / min(a, b x num_actors, c). All rates are
environment frames per second (agent steps x action repeat). Stages (a)-(c) each run
alone with every core to themselves, while the program's nodes share the cores, so
the bound is optimistic on a small machine: the efficiency is a lower bound there.
"""

import json
import os
import subprocess
import sys
import time

import s3ta  # noqa: F401  pylint: disable=unused-import  (rlax before TF)
from s3ta.envs import factory
from s3ta.networks import make_network
from launch import config_checks

from absl import app, flags  # pylint: disable=g-import-not-at-top
from ml_collections import config_flags  # pylint: disable=g-import-not-at-top

_CONFIG = config_flags.DEFINE_config_file('config', None, 'Experiment config file.')
_WORKDIR = flags.DEFINE_string('workdir', None, 'Workdir of the end-to-end run (emptied first).')
_SECONDS = flags.DEFINE_float('seconds', 10.0, 'Measuring time of each isolated stage.')
_SKIP_E2E = flags.DEFINE_bool('skip_end_to_end', False, 'Only measure stages (a)-(c).')
_OUTPUT = flags.DEFINE_string('output', None, 'Also write the numbers as JSON here.')
_INFERENCE = flags.DEFINE_list('inference', ['actor'],
                               'End-to-end runs, one per inference mode: actor, central.')

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _timed(fn, seconds: float, warmup: int = 2) -> tuple[int, float]:
  for _ in range(warmup):
    fn()
  calls, start = 0, time.time()
  while time.time() - start < seconds:
    fn()
    calls += 1
  return calls, time.time() - start


def envpool_fps(config, seconds: float) -> float:
  import numpy as np  # pylint: disable=g-import-not-at-top
  num_envs = config.num_actors * config.env.num_envs
  env_config = config.env.copy_and_resolve_references()
  env_config.num_threads = 0
  env = factory.make_env(env_config, num_envs, seed=0)
  rng = np.random.default_rng(0)
  env.reset()
  calls, span = _timed(lambda: env.step(rng.integers(0, env.num_actions, num_envs)), seconds)
  env.close()
  return calls * num_envs * factory.frames_per_step(config.env) / span


def inference_fps(config, network, seconds: float) -> float:
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from s3ta.acting import make_select_action  # pylint: disable=g-import-not-at-top
  from s3ta.networks import AgentInput  # pylint: disable=g-import-not-at-top
  cpu = jax.devices('cpu')[0]
  num_envs = config.env.num_envs
  select_action = make_select_action(network, device=cpu)
  params = jax.device_put(network.init(jax.random.PRNGKey(0)), cpu)
  state = [jax.device_put(network.initial_state(num_envs), cpu)]
  rng = np.random.default_rng(0)
  inputs = AgentInput(
      observation=rng.integers(0, 255, (num_envs,) + network.observation_shape, dtype=np.uint8),
      prev_action=np.zeros(num_envs, np.int32), prev_reward=np.zeros(num_envs, np.float32),
      is_first=np.zeros(num_envs, bool))
  key = jax.device_put(jax.random.PRNGKey(1), cpu)

  def call():
    out, state[0] = select_action(params, key, inputs, state[0])
    np.asarray(out.action)  # the actor waits for the action

  calls, span = _timed(call, seconds)
  return calls * num_envs * factory.frames_per_step(config.env) / span


def learner_fps(config, network, seconds: float) -> tuple[float, str]:
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from s3ta.learning import LearnerConfig, Trajectory, init_training_state, make_sgd_step  # pylint: disable=g-import-not-at-top
  learner_config = LearnerConfig.from_dict(config.learner.to_dict())
  device = jax.devices()[0]
  state = jax.device_put(init_training_state(network, learner_config, jax.random.PRNGKey(0)),
                         device)
  sgd_step = make_sgd_step(network, learner_config)
  steps, batch = config.unroll_length + 1, config.batch_size
  rng = np.random.default_rng(0)
  trajectory = Trajectory(
      observation=rng.integers(0, 255, (steps, batch) + network.observation_shape, dtype=np.uint8),
      prev_action=rng.integers(0, network.num_actions, (steps, batch)).astype(np.int32),
      prev_reward=np.zeros((steps, batch), np.float32),
      is_first=np.zeros((steps, batch), bool),
      action=rng.integers(0, network.num_actions, (steps, batch)).astype(np.int32),
      behaviour_logits=np.zeros((steps, batch, network.num_actions), np.float32),
      reward=rng.normal(size=(steps, batch)).astype(np.float32),
      discount=np.ones((steps, batch), np.float32),
      initial_state=jax.tree_util.tree_map(np.asarray, network.initial_state(batch)))
  holder = [state]

  def call():  # host batch each step, as in the learner
    holder[0], metrics = sgd_step(holder[0], trajectory)
    jax.block_until_ready(metrics)

  calls, span = _timed(call, seconds)
  return calls * batch * config.unroll_length * factory.frames_per_step(config.env) / span, str(device)


def end_to_end(config_arg: list, workdir: str) -> dict:
  """Runs the program through the CLI; steady-state rates from its metrics.jsonl."""
  if os.path.exists(workdir):
    import shutil  # pylint: disable=g-import-not-at-top
    shutil.rmtree(workdir)
  start = time.time()
  result = subprocess.run([sys.executable, '-m', 'launch.train', *config_arg,
                           f'--workdir={workdir}'], cwd=REPO, capture_output=True, text=True)
  wall = time.time() - start
  if result.returncode != 0:
    raise RuntimeError(f'end-to-end run failed ({result.returncode}):\n{result.stdout[-3000:]}'
                       f'\n{result.stderr[-3000:]}')
  with open(os.path.join(workdir, 'metrics.jsonl')) as f:
    records = [json.loads(line) for line in f if line.strip()]
  learner = [r for r in records if r['label'] == 'learner']
  first, last = learner[0], learner[-1]
  consumed = (last['learner_frames'] - first['learner_frames']) / max(last['time'] - first['time'],
                                                                     1e-9)
  from launch.monitor import RunMonitor  # pylint: disable=g-import-not-at-top
  monitor = RunMonitor(workdir, 1, from_start=True)
  monitor.poll()
  return dict(learner_consumed_fps=consumed, actor_generated_fps=monitor.end_to_end_frames_per_s(),
              learner_steps=last['learner_steps'], wall_s=wall,
              first_learner_record_s=first['time'] - start,
              mean_policy_lag=sum(r.get('policy_lag') or 0 for r in learner) / len(learner))


def main(argv):
  del argv
  config = _CONFIG.value
  config_checks.validate_distributed(config)
  num_actions, observation_shape = factory.env_spec(config.env)
  network = make_network(config.network.to_dict(), num_actions, observation_shape)
  seconds = _SECONDS.value
  results = {'config': [a for a in sys.argv[1:] if a.startswith('--config')],
             'num_actors': config.num_actors, 'envs_per_actor': config.env.num_envs,
             'cpu_count': os.cpu_count()}
  print(f'(a) EnvPool only ({config.num_actors * config.env.num_envs} envs) ...', flush=True)
  results['a_envpool_fps'] = envpool_fps(config, seconds)
  print(f'(b) actor inference (batch {config.env.num_envs}, CPU) ...', flush=True)
  results['b_inference_fps_per_actor'] = inference_fps(config, network, seconds)
  print(f'(c) learner sgd_step (B={config.batch_size}, T={config.unroll_length}) ...', flush=True)
  results['c_learner_fps'], results['learner_device'] = learner_fps(config, network, seconds)
  bound = min(results['a_envpool_fps'], results['b_inference_fps_per_actor'] * config.num_actors,
              results['c_learner_fps'])
  results['bound_fps'] = bound
  if not _SKIP_E2E.value:
    if not _WORKDIR.value:
      raise app.UsageError('--workdir is required for the end-to-end run.')
    for mode in _INFERENCE.value:
      if mode not in ('actor', 'central'):
        raise app.UsageError(f"--inference must list 'actor' and/or 'central', got {mode!r}.")
      print(f'(d) end to end, inference {mode}: python -m launch.train ...', flush=True)
      e2e = end_to_end(results['config'] + [f'--config.inference.mode={mode}'],
                       os.path.abspath(f'{_WORKDIR.value}_{mode}'))
      results.update({f'd_{mode}_{k}': v for k, v in e2e.items()})
      results[f'pipeline_efficiency_{mode}'] = e2e['learner_consumed_fps'] / bound
  print('\n' + '-' * 64)
  print(f"(a) EnvPool only                {results['a_envpool_fps']:>10,.0f} frames/s")
  print(f"(b) inference, one actor        {results['b_inference_fps_per_actor']:>10,.0f} frames/s"
        f" (x {config.num_actors} actors = "
        f"{results['b_inference_fps_per_actor'] * config.num_actors:,.0f})")
  print(f"(c) learner ({results['learner_device']})".ljust(32)
        + f"{results['c_learner_fps']:>10,.0f} frames/s")
  print(f"    bound min(a, b x actors, c) {bound:>10,.0f} frames/s")
  for mode in _INFERENCE.value if not _SKIP_E2E.value else ():
    d = lambda key, mode=mode: results[f'd_{mode}_{key}']
    print(f"(d) end to end, inference {mode}: learner-consumed "
          f"{d('learner_consumed_fps'):,.0f} frames/s (actors generated "
          f"{d('actor_generated_fps') or 0:,.0f}/s; first learner record after "
          f"{d('first_learner_record_s'):.0f} s; wall {d('wall_s'):.0f} s)")
    print(f"    pipeline efficiency (d)/bound {results[f'pipeline_efficiency_{mode}']:.2f}")
  print('-' * 64)
  print(json.dumps(results))
  if _OUTPUT.value:
    with open(_OUTPUT.value, 'w') as f:
      json.dump(results, f, indent=1)


if __name__ == '__main__':
  app.run(main)
