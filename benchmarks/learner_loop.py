"""The distributed learner's own loop against its bare `sgd_step`: what the host costs it.

  python -m benchmarks.learner_loop --config=experiments/atari_fast.py --seconds=20

Issue 9's host-pipeline measure: the learner's step rate inside the program divided by
the same step alone. One process, one config, measured in this order:
  (c) the bare step: `benchmarks.stages.learner_fps` (the jitted `sgd_step` on one host
      batch, waiting for each step), as in `benchmarks/pipeline.py`;
  (e) the program's learner loop: `Learner.run` of `launch/program.py`'s settings
      (`metrics_every_steps`, `log_period_s`), sampling from a real Reverb queue table that
      was filled beforehand with real frames (random play of the config's environment),
      while `num_actors` threads fetch every new parameter version through `get_params`
      and pickle it (as courier would send it): the most parameter traffic actors can ask;
  (c) the bare step again,
and prints ratio = (e) / mean of the two (c), the share of (e)'s wall time the loop
spent waiting for a sample, and the policy lag (0 here: no actors).

What (e) leaves out: the actors' processes (no core sharing; `benchmarks/pipeline.py`
measures that end to end) and the periodic checkpoint (once per `checkpoint_minutes`,
longer than a measurement). Rates are environment frames per second of steady state,
from the loop's first metrics record (after the compile) to its last (once the device has
finished the last step: between metric fetches the loop dispatches steps without waiting).
"""

if __name__ == '__main__':  # first: re-executing now costs only the interpreter's start
  from launch import host_tuning  # pylint: disable=g-import-not-at-top
  host_tuning.reexec_with_host_tuning()  # glibc huge pages, as every launcher (host_tuning.py)

import math
import os
import pickle
import sys
import threading
import time

import s3ta  # noqa: F401  pylint: disable=unused-import  (rlax before TF)
import jax
import numpy as np
from s3ta.acting.actor_core import agent_input
from s3ta.acting.unroll import UnrollAccumulator
from s3ta.envs import factory
from s3ta.networks import make_network
from s3ta.replay import queue as replay
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


def random_play_items(config, network, count: int, seed: int = 0) -> list[dict]:
  """`count` queue items of the config's environment under random play, as an actor writes them."""
  num_envs = min(count, config.env.num_envs)
  env = factory.make_env(config.env, num_envs, seed=seed)
  accumulator = UnrollAccumulator(config.unroll_length)
  state = jax.tree_util.tree_map(np.asarray, network.initial_state(num_envs))
  rng = np.random.default_rng(seed)
  uniform = np.zeros((num_envs, network.num_actions), np.float32)
  env_step, prev_action = env.reset(), np.zeros(num_envs, np.int32)
  items: list[dict] = []
  while len(items) < count:
    inputs = agent_input(env_step, prev_action)
    action = rng.integers(0, network.num_actions, num_envs).astype(np.int32)
    next_env_step = env.step(action)
    trajectory = accumulator.add(
        dict(inputs._asdict(), action=action, behaviour_logits=uniform,
             reward=next_env_step.reward, discount=next_env_step.discount), state)
    if trajectory is not None:
      items += replay.split_trajectory(trajectory, np.zeros(config.unroll_length + 1, np.int32),
                                       actor_id=0, unroll_index=len(items))
    prev_action, env_step = action, next_env_step
  env.close()
  return items[:count]


def _serve_queue(spec: dict, size: int, connection) -> None:
  """The replay node's part: a Reverb queue table in its own process, until told to stop."""
  import reverb  # pylint: disable=g-import-not-at-top
  server = reverb.Server([replay.make_queue_table(size, replay.signature_of_spec(spec))], port=None)
  connection.send(server.port)
  connection.recv()
  server.stop()


def _start_replay_process(spec: dict, size: int):
  """(process, its pipe, port) of a Reverb server in a child process.

  In its own process, as the program's replay node is: samples then cross gRPC (a server
  in the learner's process would be read directly, skipping that cost).
  """
  import multiprocessing  # pylint: disable=g-import-not-at-top
  context = multiprocessing.get_context('spawn')
  parent, child = context.Pipe()
  process = context.Process(target=_serve_queue, args=(spec, size, child), daemon=True)
  process.start()
  if not parent.poll(120):
    process.kill()
    raise RuntimeError('the Reverb server process did not start within 120 s.')
  return process, parent, parent.recv()


def learner_loop_fps(config, network, seconds: float, bare_steps_per_s: float,
                     distinct_items: int, param_fetchers: int = -1) -> dict:
  """Steady-state rate of `Learner.run` on a pre-filled Reverb queue (module docstring)."""
  import reverb  # pylint: disable=g-import-not-at-top  (after jax: see DESIGN.md)
  from s3ta.learning.learner import Learner  # pylint: disable=g-import-not-at-top
  batch = config.batch_size
  log_period = min(config.log_period_s, seconds / 4)
  # Enough batches for the compile's log period plus `seconds` at the bare rate, and spare.
  steps = math.ceil(bare_steps_per_s * (seconds + log_period) * 1.25) + 4
  # Batches left over at the end keep the sampler's thread off an empty queue.
  items = (steps + 4) * batch
  pool = random_play_items(config, network, min(distinct_items, items))
  server, server_pipe, port = _start_replay_process(
      replay.item_spec(network, config.unroll_length), items)
  address = f'localhost:{port}'
  writer = replay.TrajectoryQueueWriter(reverb.Client(address))
  for i in range(items):
    writer.write([pool[i % len(pool)]])
  writer.close(flush=True)
  del writer
  records = []

  def logger(record):
    if record.get('final'):  # steps may still be in flight (metrics not fetched): wait for them
      jax.block_until_ready(learner.current_params[1])
    records.append(dict(record, time=time.time()))

  learner = Learner(network, config.learner.to_dict(), batch_size=batch,
                    unroll_length=config.unroll_length,
                    frames_per_step=factory.frames_per_step(config.env), server_address=address,
                    logger=logger, max_steps=steps, log_period_s=log_period,
                    sample_timeout_ms=config.sample_timeout_ms,
                    metrics_every_steps=config.get('metrics_every_steps', 1),
                    exit_if_sampler_stuck=False)
  done = threading.Event()
  fetches = [0] * (config.num_actors if param_fetchers < 0 else param_fetchers)

  def fetch_params(index):  # one actor's parameter refreshes, as often as versions change
    known = -1
    while not done.is_set():
      answer = learner.get_params(known)
      if answer['params'] is not None:
        pickle.dumps(answer['params'], protocol=pickle.HIGHEST_PROTOCOL)
        known = answer['version']
        fetches[index] += 1
      done.wait(0.002)

  fetchers = [threading.Thread(target=fetch_params, args=(i,), daemon=True)
              for i in range(len(fetches))]
  for thread in fetchers:
    thread.start()
  try:
    reason = learner.run()
  finally:
    done.set()
    for thread in fetchers:
      thread.join()
    server_pipe.send('stop')
    server.join(30)
    if server.is_alive():
      server.kill()
  if reason != 'max_learner_steps' or learner.counters.learner_steps != steps:
    raise RuntimeError(f'the learner loop stopped early ({reason!r} at step '
                       f'{learner.counters.learner_steps} of {steps}).')
  first, last = records[0], records[-1]
  span = last['time'] - first['time']
  steady = records[1:]
  return dict(
      e_learner_loop_fps=(last['learner_frames'] - first['learner_frames']) / span,
      e_steps=last['learner_steps'] - first['learner_steps'], e_seconds=span,
      e_wait_share=sum(r['wait_s'] for r in steady) / span,
      e_param_fetchers=len(fetches),
      e_param_fetches_per_thread=sum(fetches) / max(len(fetches), 1),
      e_items_per_step=learner.counters.items_consumed / learner.counters.learner_steps,
      e_sampler_closed=learner.sampler_closed)


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
             'metrics_every_steps': config.get('metrics_every_steps', 1), 'cpu_count': os.cpu_count(),
             'glibc_tunables': os.environ.get('GLIBC_TUNABLES', '')}
  print(f'(c) bare sgd_step (B={config.batch_size}, T={config.unroll_length}) ...', flush=True)
  results['c_before_fps'], results['learner_device'] = stages.learner_fps(config, network, seconds)
  print('(e) the learner loop on a pre-filled Reverb queue ...', flush=True)
  results.update(learner_loop_fps(config, network, seconds,
                                  results['c_before_fps'] / frames_per_batch, _DISTINCT_ITEMS.value,
                                  _PARAM_FETCHERS.value))
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
