"""Stages of the distributed pipeline, each timed alone: EnvPool, actor inference, `sgd_step`,
and the learner's own loop on a pre-filled Reverb queue.

Shared by `benchmarks/pipeline.py` (stages against the program end to end) and
`benchmarks/learner_loop.py` (the bare step against the learner's own loop). Rates are
environment frames per second (agent steps x action repeat). No flags here: tests import it.
"""

import json
import math
import pickle
import threading
import time

import jax
import numpy as np

from s3ta.acting.actor_core import agent_input
from s3ta.acting.unroll import UnrollAccumulator
from s3ta.envs import factory
from s3ta.replay import queue as replay


def _timed(fn, seconds: float, warmup: int = 2) -> tuple[int, float]:
  for _ in range(warmup):
    fn()
  calls, start = 0, time.time()
  while time.time() - start < seconds:
    fn()
    calls += 1
  return calls, time.time() - start


def envpool_fps(config, seconds: float) -> float:
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


def print_and_save(results: dict, output_path=None) -> None:
  """Prints a benchmark's results as one JSON line, and writes them to `output_path` if given."""
  print(json.dumps(results))
  if output_path:
    with open(output_path, 'w') as f:
      json.dump(results, f, indent=1)


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
  """Steady rate of `Learner.run` on a pre-filled Reverb queue (benchmarks/learner_loop.py)."""
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
