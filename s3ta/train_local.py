"""Single-process IMPALA training: batched env -> actor core -> unrolls -> sgd_step.

For debugging, tests and laptops; the distributed program in `launch/` runs the
same actor core and `sgd_step` across processes. Usage:

  python -m s3ta.train_local --config=experiments/catch.py [--config.max_env_steps=...]
"""

import dataclasses
import json
import os
import time
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from s3ta.acting import UnrollAccumulator, agent_input, make_select_action
from s3ta.envs.base import EpisodeTracker
from s3ta.envs.catch import BatchedCatch
from s3ta.learning import LearnerConfig, init_training_state, make_sgd_step
from s3ta.networks import make_network, parameter_count


@dataclasses.dataclass
class TrainResult:
  params: object
  network: object
  env_steps: int
  sgd_steps: int
  seconds: float
  episode_returns: list  # in the order episodes finished
  final_eval_return: Optional[float]


def make_env(env_config, num_envs: int, seed: int):
  """The batched environment named by `env_config.name` ('catch' here)."""
  if env_config.name == 'catch':
    return BatchedCatch(num_envs, rows=env_config.rows, columns=env_config.columns,
                        pixel_scale=env_config.pixel_scale, seed=seed)
  raise ValueError(f"Unknown single-process env {env_config.name!r}; valid: ['catch'] "
                   '(Atari runs use the distributed program: python -m launch.train).')


def evaluate(network, params, env, num_episodes: int, seed: int) -> float:
  """Mean return of `num_episodes` episodes with the sampled (trained) policy."""
  select_action = make_select_action(network)
  rng = jax.random.PRNGKey(seed)
  tracker = EpisodeTracker(env.num_envs)
  env_step, state = env.reset(), network.initial_state(env.num_envs)
  prev_action = np.zeros(env.num_envs, np.int32)
  returns = []
  while len(returns) < num_episodes:
    rng, key = jax.random.split(rng)
    out, state = select_action(params, key, agent_input(env_step, prev_action), state)
    prev_action = np.asarray(out.action)
    env_step = env.step(prev_action)
    returns += [r for r, _ in tracker.update(env_step)]
  return float(np.mean(returns[:num_episodes]))


def train(config, log: Callable[[str], None] = print,
          stop_return: Optional[float] = None) -> TrainResult:
  """Trains for `config.max_env_steps` agent steps (all envs together).

  If `stop_return` is set, stops early once the mean of the last
  `config.return_window` training episodes reaches it.
  """
  if config.unroll_length < 1:
    raise ValueError(f'unroll_length must be >= 1, got {config.unroll_length}.')
  if config.num_envs < 1:
    raise ValueError(f'num_envs must be >= 1, got {config.num_envs}.')
  env = make_env(config.env, config.num_envs, config.seed)
  network = make_network(config.network, env.num_actions, env.observation_shape)
  learner_config = LearnerConfig.from_dict(config.learner)
  rng = jax.random.PRNGKey(config.seed)
  rng, init_key = jax.random.split(rng)
  state = init_training_state(network, learner_config, init_key)
  sgd_step = make_sgd_step(network, learner_config)
  select_action = make_select_action(network)
  log(f'[train_local] {config.network.kind} network, {parameter_count(state.params):,} parameters, '
      f'observation {env.observation_shape}, {env.num_envs} envs, unroll {config.unroll_length}')

  accumulator = UnrollAccumulator(config.unroll_length)
  tracker = EpisodeTracker(env.num_envs)
  env_step, agent_state = env.reset(), network.initial_state(env.num_envs)
  prev_action = np.zeros(env.num_envs, np.int32)
  returns: list[float] = []
  env_steps = 0
  start = last_log = time.time()
  metrics = {}
  while env_steps < config.max_env_steps:
    rng, key = jax.random.split(rng)
    inputs = agent_input(env_step, prev_action)
    out, next_state = select_action(state.params, key, inputs, agent_state)
    action = np.asarray(out.action)
    next_env_step = env.step(action)
    trajectory = accumulator.add(
        dict(observation=inputs.observation, prev_action=inputs.prev_action,
             prev_reward=inputs.prev_reward, is_first=inputs.is_first, action=action,
             behaviour_logits=np.asarray(out.logits), reward=next_env_step.reward,
             discount=next_env_step.discount), agent_state)
    agent_state, prev_action, env_step = next_state, action, next_env_step
    env_steps += env.num_envs
    returns += [r for r, _ in tracker.update(env_step)]

    if trajectory is not None:
      state, metrics = sgd_step(state, jax.tree_util.tree_map(jnp.asarray, trajectory))
    recent = returns[-config.return_window:]
    if time.time() - last_log > config.log_every_seconds:
      last_log = time.time()
      log(f'[train_local] steps {env_steps:,} sgd {int(state.steps):,} episodes {len(returns):,} '
          f'mean return {np.mean(recent) if recent else float("nan"):+.3f} '
          f'loss {float(metrics.get("loss", np.nan)):.3f} '
          f'{env_steps / (time.time() - start):,.0f} steps/s')
    if (stop_return is not None and len(recent) >= config.return_window
        and np.mean(recent) >= stop_return):
      break

  seconds = time.time() - start
  eval_return = None
  if config.eval_episodes:
    eval_env = make_env(config.env, config.num_envs, config.seed + 1)
    eval_return = evaluate(network, state.params, eval_env, config.eval_episodes, config.seed + 1)
  log(f'[train_local] done: {env_steps:,} steps, {int(state.steps):,} sgd steps, {seconds:.1f} s, '
      f'{len(returns):,} episodes, final eval return {eval_return}')
  return TrainResult(state.params, network, env_steps, int(state.steps), seconds, returns,
                     eval_return)


def main(argv):
  del argv
  from absl import flags  # pylint: disable=g-import-not-at-top
  config = flags.FLAGS.config
  result = train(config)
  summary = {'env_steps': result.env_steps, 'sgd_steps': result.sgd_steps,
             'seconds': round(result.seconds, 1), 'episodes': len(result.episode_returns),
             'final_eval_return': result.final_eval_return}
  print(json.dumps(summary))


if __name__ == '__main__':
  from absl import app, flags  # pylint: disable=g-import-not-at-top
  from ml_collections import config_flags  # pylint: disable=g-import-not-at-top
  config_flags.DEFINE_config_file(
      'config', os.path.join(os.path.dirname(__file__), '..', 'experiments', 'catch.py'),
      'Training configuration file (get_config).')
  app.run(main)
