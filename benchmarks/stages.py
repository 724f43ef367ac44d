"""Stages of the distributed pipeline, each timed alone: EnvPool, actor inference, `sgd_step`.

Shared by `benchmarks/pipeline.py` (stages against the program end to end) and
`benchmarks/learner_loop.py` (the bare step against the learner's own loop). Rates are
environment frames per second (agent steps x action repeat).
"""

import json
import time

from s3ta.envs import factory


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


def print_and_save(results: dict, output_path=None) -> None:
  """Prints a benchmark's results as one JSON line, and writes them to `output_path` if given."""
  print(json.dumps(results))
  if output_path:
    with open(output_path, 'w') as f:
      json.dump(results, f, indent=1)
