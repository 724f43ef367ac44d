"""The distributed learner's own loop against its bare `sgd_step`: what the host costs it.

  python -m benchmarks.learner_loop --config=experiments/atari_fast.py --seconds=20

Issue 9's host-pipeline measure: the learner's step rate inside the program divided by
the same step alone. One process, one config, measured in this order:
  (c) the bare step: `benchmarks.stages.learner_fps` (the jitted `sgd_step` on one host
      batch, waiting for each step), as in `benchmarks/pipeline.py`;
  (e) the program's learner loop: `Learner.run` of `launch/program.py`'s settings
      (`metrics_every_steps`, `log_period_s`), sampling from a real Reverb queue table that
      was filled beforehand with real frames (random play of the config's environment),
      while `num_actors` threads (`--param_fetchers`) poll `get_params` every 2 ms and
      pickle each new version (as courier would send it): at least the parameter traffic
      of actors that refresh every version;
  (c) the bare step again,
and prints ratio = (e) / mean of the two (c) and the share of (e)'s wall time the loop
spent waiting for a sample.

What (e) leaves out: the actors' processes (no core sharing; `benchmarks/pipeline.py`
measures that end to end) and the periodic checkpoint (once per `checkpoint_minutes`,
longer than a measurement). Rates are environment frames per second of steady state,
from the loop's first metrics record (after the compile) to its last (once the device has
finished the last step: between metric fetches the loop dispatches steps without waiting).
"""

if __name__ == '__main__':  # first: re-executing now costs only the interpreter's start
  from launch import host_tuning  # pylint: disable=g-import-not-at-top
  host_tuning.reexec_with_host_tuning()  # glibc huge pages, as every launcher (host_tuning.py)

import os
import sys

import s3ta  # noqa: F401  pylint: disable=unused-import  (rlax before TF)
from s3ta.envs import factory
from s3ta.networks import make_network
from benchmarks import stages
from launch import config_checks

from absl import app, flags  # pylint: disable=g-import-not-at-top
from ml_collections import config_flags  # pylint: disable=g-import-not-at-top

_CONFIG = config_flags.DEFINE_config_file('config', None, 'Experiment config file.')
_SECONDS = flags.DEFINE_float('seconds', 20.0, 'Measuring time of each stage (steady state).')
_DISTINCT_ITEMS = flags.DEFINE_integer(
    'distinct_items', 64, 'Distinct unrolls of random play; the queue cycles through them.')
_PARAM_FETCHERS = flags.DEFINE_integer(
    'param_fetchers', -1, 'Threads fetching parameters during (e); -1: config.num_actors.')
_OUTPUT = flags.DEFINE_string('output', None, 'Also write the numbers as JSON here.')


def main(argv):
  del argv
  config = _CONFIG.value
  config_checks.validate_distributed(config)
  num_actions, observation_shape = factory.env_spec(config.env)
  network = make_network(config.network.to_dict(), num_actions, observation_shape)
  seconds = _SECONDS.value
  frames_per_batch = config.batch_size * config.unroll_length * factory.frames_per_step(config.env)
  results = {'config': [a for a in sys.argv[1:] if a.startswith('--config')],
             'batch_size': config.batch_size, 'unroll_length': config.unroll_length,
             'metrics_every_steps': config.get('metrics_every_steps', 1),
             'cpu_count': os.cpu_count(),
             'glibc_tunables': os.environ.get('GLIBC_TUNABLES', '')}
  print(f'(c) bare sgd_step (B={config.batch_size}, T={config.unroll_length}) ...', flush=True)
  results['c_before_fps'], results['learner_device'] = stages.learner_fps(config, network, seconds)
  print('(e) the learner loop on a pre-filled Reverb queue ...', flush=True)
  results.update(stages.learner_loop_fps(
      config, network, seconds, results['c_before_fps'] / frames_per_batch,
      _DISTINCT_ITEMS.value, _PARAM_FETCHERS.value))
  print('(c) bare sgd_step again ...', flush=True)
  results['c_after_fps'], _ = stages.learner_fps(config, network, seconds)
  bare = (results['c_before_fps'] + results['c_after_fps']) / 2
  results['ratio'] = results['e_learner_loop_fps'] / bare
  print('\n' + '-' * 64)
  print(f"(c) bare sgd_step ({results['learner_device']}): {results['c_before_fps']:,.0f} then "
        f"{results['c_after_fps']:,.0f} frames/s")
  print(f"(e) learner loop: {results['e_learner_loop_fps']:,.0f} frames/s over "
        f"{results['e_steps']} steps ({results['e_seconds']:.1f} s), waiting for samples "
        f"{100 * results['e_wait_share']:.1f} % of it; {results['e_param_fetches_per_thread']:.0f} "
        f"parameter fetches by each of {results['e_param_fetchers']} threads")
  print(f"    ratio (e) / mean (c)        {results['ratio']:.2f}")
  print('-' * 64)
  stages.print_and_save(results, _OUTPUT.value)
  if not results['e_sampler_closed']:  # its blocked Reverb iterator would hold the exit
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # pylint: disable=protected-access


if __name__ == '__main__':
  app.run(main)
