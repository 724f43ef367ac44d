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

if __name__ == '__main__':  # first: the stages then run under the program's own malloc setting
  from launch import host_tuning  # pylint: disable=g-import-not-at-top
  host_tuning.reexec_with_host_tuning()  # glibc huge pages, as every launcher (host_tuning.py)

import json
import math
import os
import subprocess
import sys
import time

import s3ta  # noqa: F401  pylint: disable=unused-import  (rlax before TF)
from s3ta.envs import factory
from s3ta.networks import make_network
from benchmarks import stages
from benchmarks.stages import envpool_fps, inference_fps, learner_fps
from launch import cli, config_checks

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
  if config is None:
    cli.exit_error('--config is required, e.g. --config=experiments/smoke.py.')
  try:
    config_checks.validate_distributed(config)
  except ValueError as e:
    cli.exit_error(f'invalid config: {e}')
  if not (math.isfinite(_SECONDS.value) and _SECONDS.value > 0):
    cli.exit_error(f'--seconds must be a number > 0, got {_SECONDS.value!r}.')
  if not _SKIP_E2E.value:  # checked before the stages' minutes, not after
    if not _WORKDIR.value:
      cli.exit_error('--workdir is required for the end-to-end run (or --skip_end_to_end).')
    unknown = [mode for mode in _INFERENCE.value if mode not in ('actor', 'central')]
    if unknown or not _INFERENCE.value:
      cli.exit_error(f"--inference must list 'actor' and/or 'central', got {_INFERENCE.value}.")
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
    for mode in _INFERENCE.value:
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
  stages.print_and_save(results, _OUTPUT.value)


if __name__ == '__main__':
  app.run(main, flags_parser=cli.parse_flags)
