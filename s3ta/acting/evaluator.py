"""The evaluator: plays episodes with the learner's latest parameters and reports scores.

Every `period_s` seconds it fetches parameters (with a timeout, trap 2), plays
`num_episodes` episodes on its own environment batch (sampled or greedy actions)
and logs raw returns and the human-normalised score of their mean
(`s3ta.envs.human_scores`). Episodes longer than `max_episode_steps` agent steps
are cut and counted with their partial return (flagged `truncated`).
"""

import time
from typing import Callable, Optional

import jax
import numpy as np

from s3ta.acting.policy import wait_for_params
from s3ta.acting.actor_core import agent_input
from s3ta.acting.actor_core import make_select_action
from s3ta.envs import human_scores


def play_episodes(network, params, env, num_episodes: int, rng_key, *, greedy: bool = False,
                  max_episode_steps: int = 0, should_stop: Callable[[], bool] = lambda: False,
                  select_action=None) -> tuple[list[float], int]:
  """Plays until `num_episodes` episodes ended; returns (returns, number cut short).

  Only the first episode of each environment counts, so the sample is not biased
  towards short episodes when num_envs > 1 (extra environments are not started).
  """
  cpu = jax.devices('cpu')[0]
  select_action = select_action or make_select_action(network, greedy=greedy, device=cpu)
  num_envs = env.num_envs
  rng = jax.device_put(np.asarray(rng_key, np.uint32), cpu)
  returns: list[float] = []
  truncated = 0
  while len(returns) < num_episodes and not should_stop():
    env_step = env.reset()
    state = network.initial_state(num_envs)
    prev_action = np.zeros(num_envs, np.int32)
    totals = np.zeros(num_envs)
    done = np.zeros(num_envs, bool)
    wanted = min(num_envs, num_episodes - len(returns))
    done[wanted:] = True
    steps = 0
    while not done.all() and not should_stop():
      rng, key = jax.random.split(rng)
      out, state = select_action(params, key, agent_input(env_step, prev_action), state)
      prev_action = np.asarray(out.action)
      env_step = env.step(prev_action)
      steps += 1
      totals += np.where(done, 0.0, env_step.reward)
      ended = ~done & np.asarray(env_step.last, bool)
      returns += [float(r) for r in totals[ended]]
      done |= ended
      if max_episode_steps and steps >= max_episode_steps:
        cut = ~done
        returns += [float(r) for r in totals[cut]]
        truncated += int(cut.sum())
        done |= cut
  return returns[:num_episodes], truncated


class Evaluator:
  """Periodic evaluation node body.

  Args:
    env: BatchedEnv used for evaluation.
    network: the agent `Network`.
    params_source: () -> (version, params) or None (see `CourierParamsSource`).
    game: game name for the human-normalised score ('' to skip it).
    rng_key: PRNG key of the evaluator.
    period_s, num_episodes, greedy, max_episode_steps: see the config's `evaluator`.
    should_stop: True when the program is stopping.
    wait: (seconds) -> True if stopping; waits between evaluations (lp.wait_for_stop).
    logger: callable(dict) for metrics records.
  """

  def __init__(self, env, network, params_source, *, game: str, rng_key, period_s: float,
               num_episodes: int, greedy: bool = False, max_episode_steps: int = 0,
               should_stop: Callable[[], bool] = lambda: False,
               wait: Optional[Callable[[float], bool]] = None,
               logger: Optional[Callable[[dict], None]] = None):
    if num_episodes < 1:
      raise ValueError(f'evaluator num_episodes must be >= 1, got {num_episodes}.')
    self._env, self._network, self._source = env, network, params_source
    self._game, self._rng = game, np.asarray(rng_key, np.uint32)
    self._period_s, self._num_episodes = period_s, num_episodes
    self._greedy, self._max_steps = greedy, max_episode_steps
    self._should_stop = should_stop
    self._wait = wait or (lambda s: (time.sleep(s), should_stop())[1])
    self._logger = logger
    self._select_action = make_select_action(network, greedy=greedy, device=jax.devices('cpu')[0])
    self.results: list[dict] = []

  def evaluate_once(self) -> Optional[dict]:
    fetched = wait_for_params(self._source, self._should_stop)
    if fetched is None:
      return None
    version, params = fetched
    self._rng, key = jax.random.split(self._rng)
    start = time.time()
    returns, truncated = play_episodes(
        self._network, params, self._env, self._num_episodes, key, greedy=self._greedy,
        max_episode_steps=self._max_steps, should_stop=self._should_stop,
        select_action=self._select_action)
    if not returns:
      return None
    mean = float(np.mean(returns))
    record = dict(param_version=version, episode_returns=returns, mean_return=mean,
                  episodes=len(returns), truncated=truncated, seconds=time.time() - start)
    if self._game and not truncated:  # a cut episode's return is no score
      try:
        record['human_normalized_score'] = human_scores.human_normalized_score(self._game, mean)
      except ValueError:
        record['human_normalized_score'] = None
    self.results.append(record)
    if self._logger is not None:
      self._logger(record)
    return record

  def run(self) -> None:
    while not self._should_stop():
      self.evaluate_once()
      if self._wait(self._period_s):
        break
