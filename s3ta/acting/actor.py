"""The distributed actor loop: a batch of environments → jitted policy → Reverb items.

One side-effecting loop around a policy (DESIGN.md §5.3): by default the pure
`select_action` jitted on the actor's CPU (`LocalPolicy`); with central inference a
`RemotePolicy` that asks an inference node (`s3ta/acting/policy.py`). The actor cuts
[T + 1, E] unrolls with `UnrollAccumulator` (one-step overlap), tags each step with
the parameter version that chose it, and writes one Reverb item per environment (see
`s3ta/replay/queue.py`). The policy refreshes its parameters every
`param_refresh_steps` steps; every blocking call (Reverb flush, courier call) has a
timeout and re-checks the stop signal (traps 2 and 3). Per-stage timers (env,
inference, write, params) go into the metrics records.
"""

import collections
import os
import time
from typing import Any, Callable, Optional, Sequence

import numpy as np

from s3ta.acting.actor_core import agent_input
from s3ta.acting.policy import LocalPolicy
from s3ta.acting.unroll import UnrollAccumulator
from s3ta.envs.base import EpisodeTracker
from s3ta.replay import queue as replay

RECENT_RETURNS = 1000  # episode returns an actor keeps in memory


def actor_record(*, actor_id: int, env_steps: int, frames: int, episodes: int,
                 window_returns: Sequence[float], frames_per_s: float, param_version: int,
                 elapsed_s: float, timers: dict, span: float, **extra) -> dict:
  """An actor's metrics record, as both trainers write it (curves and reports read these keys).

  `window_returns` are the returns of the episodes since the last record; `timers` the
  seconds spent in each acting phase over the last `span` seconds.
  """
  return dict(
      actor_id=actor_id, env_steps=env_steps, frames=frames, episodes=episodes,
      window_episodes=len(window_returns),
      window_return_mean=float(np.mean(window_returns)) if len(window_returns) else None,
      frames_per_s=frames_per_s, param_version=param_version, pid=os.getpid(),
      elapsed_s=elapsed_s, **{f'timer/{k}': v for k, v in timers.items()},
      **{f'timer_frac/{k}': v / span for k, v in timers.items()}, **extra)


class CourierParamsSource:
  """Fetches `{'version', 'params'}` from the learner over courier, never forever.

  The client must be built with a `call_timeout` (trap 2); failed calls return
  None so the caller keeps acting with the params it has and retries later.
  `__call__` blocks (start-up); `poll` never does: it starts an asynchronous call
  and returns the newest parameters received so far, so refreshing parameters
  stays off the actor's critical path.
  """

  def __init__(self, learner_client):
    self._learner = learner_client
    self._version, self._params = -1, None
    self._pending = None  # concurrent.futures.Future of an asynchronous get_params

  def _take(self, reply) -> None:
    if reply['params'] is not None:  # None: unchanged since our last fetch
      self._version, self._params = int(reply['version']), reply['params']

  def __call__(self) -> Optional[tuple[int, Any]]:
    try:
      self._take(self._learner.get_params(self._version))
    except Exception:  # pylint: disable=broad-except  (timeouts, learner gone)
      return None
    return self._version, self._params

  def poll(self) -> Optional[tuple[int, Any]]:
    if self._pending is not None and self._pending.done():
      try:
        self._take(self._pending.result())
      except Exception:  # pylint: disable=broad-except  (timeouts, learner gone)
        pass
      self._pending = None
    if self._pending is None:
      try:
        self._pending = self._learner.futures.get_params(self._version)
      except Exception:  # pylint: disable=broad-except
        self._pending = None
    return (self._version, self._params) if self._params is not None else None


class Actor:
  """Runs E environments with the latest learner parameters and fills the queue.

  Args:
    actor_id: index of this actor (goes into each item's `meta`).
    env: a BatchedEnv with E environments.
    network: the agent `Network`.
    params_source: () -> (version, params) or None (see `CourierParamsSource`), for the
      default `LocalPolicy`; unused when `policy` is given.
    writer: `TrajectoryQueueWriter`, or None to only return trajectories (tests).
    unroll_length: T.
    rng_key: this actor's PRNG key (one per actor).
    param_refresh_steps: environment steps (of the batch) between parameter fetches.
    should_stop: True when the program is stopping.
    logger: callable(dict) for metrics records, or None.
    log_period_s: seconds between metrics records.
    frames_per_step: environment frames per agent step (action repeat), for counting.
    on_trajectory: optional callback(trajectory, versions, agent_state_before_step0)
      for tests and benchmarks.
    on_episodes: optional finished-episode hook: called with the returns of the episodes
      finished since the previous metrics record (only when there are any), just before
      that record is logged; a dict it returns is added to the record (PBT: per-game
      returns, and reporting them to the learner). `recent_returns` keeps the last RECENT_RETURNS returns.
    policy: where actions come from (`LocalPolicy` or `RemotePolicy`); default a
      `LocalPolicy` of `network`, `params_source` and `rng_key`.
  """

  def __init__(self, actor_id: int, env, network, params_source, writer, *, unroll_length: int,
               rng_key, param_refresh_steps: int = 20,
               should_stop: Callable[[], bool] = lambda: False,
               logger: Optional[Callable[[dict], None]] = None, log_period_s: float = 10.0,
               frames_per_step: int = 1, on_trajectory: Optional[Callable] = None,
               on_episodes: Optional[Callable[[list[float]], Optional[dict]]] = None,
               policy=None):
    if param_refresh_steps < 1:
      raise ValueError(f'param_refresh_steps must be >= 1, got {param_refresh_steps}.')
    self._id = actor_id
    self._env = env
    self._policy = policy or LocalPolicy(network, params_source, rng_key, should_stop)
    self._writer = writer
    self._unroll_length = unroll_length
    self._refresh = param_refresh_steps
    self._should_stop = should_stop
    self._logger = logger
    self._log_period_s = log_period_s
    self._frames_per_step = frames_per_step
    self._on_trajectory = on_trajectory
    self._on_episodes = on_episodes
    self.env_steps = 0  # agent steps of the batch (x E x frames_per_step = frames)
    self.unrolls = 0
    self.episodes = 0  # finished episodes
    self.recent_returns = collections.deque(maxlen=RECENT_RETURNS)  # bounded: runs are long

  @property
  def param_version(self) -> int:
    """Version of the parameters behind the latest actions (-1 before the first)."""
    return self._policy.version

  def run(self, max_unrolls: Optional[int] = None) -> None:
    """Acts until stopped (or `max_unrolls` unrolls were cut, for tests)."""
    env, num_envs = self._env, self._env.num_envs
    if not self._policy.start(num_envs):
      return
    accumulator = UnrollAccumulator(self._unroll_length)
    tracker = EpisodeTracker(num_envs)
    versions: list[int] = []
    timers = dict(env_s=0.0, inference_s=0.0, write_s=0.0, params_s=0.0)
    window_returns: list[float] = []
    start = last_log = time.time()
    steps_at_log = 0

    t0 = time.time()
    env_step = env.reset()
    timers['env_s'] += time.time() - t0
    prev_action = np.zeros(num_envs, np.int32)
    while not self._should_stop():
      t0 = time.time()
      inputs = agent_input(env_step, prev_action)
      out = self._policy.step(inputs, want_state=accumulator.needs_state)
      if out is None:
        break  # stopping while the inference node did not answer
      action = out.action
      t1 = time.time()
      next_env_step = env.step(action)
      t2 = time.time()
      timers['inference_s'] += t1 - t0
      timers['env_s'] += t2 - t1
      trajectory = accumulator.add(
          dict(observation=inputs.observation, prev_action=inputs.prev_action,
               prev_reward=inputs.prev_reward, is_first=inputs.is_first, action=action,
               behaviour_logits=out.logits, reward=next_env_step.reward,
               discount=next_env_step.discount), out.state_before)
      versions.append(out.version)
      prev_action, env_step = action, next_env_step
      self.env_steps += 1
      finished = [r for r, _ in tracker.update(env_step)]
      self.episodes += len(finished)
      self.recent_returns.extend(finished)
      window_returns += finished

      if trajectory is not None:
        item_versions = np.asarray(versions[-(self._unroll_length + 1):], np.int32)
        versions = versions[-1:]
        if self._on_trajectory is not None:
          self._on_trajectory(trajectory, item_versions)
        if self._writer is not None:
          items = replay.split_trajectory(trajectory, item_versions, self._id, self.unrolls)
          if not self._writer.write(items):
            break  # stopping while the queue was full
        self.unrolls += 1
        timers['write_s'] += time.time() - t2
        if max_unrolls is not None and self.unrolls >= max_unrolls:
          break

      if self.env_steps % self._refresh == 0:
        t3 = time.time()
        self._policy.refresh()
        timers['params_s'] += time.time() - t3

      now = time.time()
      if now - last_log >= self._log_period_s:
        self._log(now - last_log, self.env_steps - steps_at_log, window_returns, timers,
                  now - start)
        steps_at_log, last_log, window_returns = self.env_steps, now, []
        timers = dict.fromkeys(timers, 0.0)
    self._log(max(time.time() - last_log, 1e-6), self.env_steps - steps_at_log, window_returns,
              timers, time.time() - start, final=True)
    print(f'[actor {self._id}] stopped after {self.env_steps} batch steps, {self.unrolls} unrolls',
          flush=True)

  def _log(self, span, steps, returns, timers, elapsed, **extra):
    fields = None
    if self._on_episodes is not None and returns:
      fields = self._on_episodes(list(returns))
    if self._logger is None:
      return
    frames_per_batch_step = self._env.num_envs * self._frames_per_step
    record = actor_record(
        actor_id=self._id, env_steps=self.env_steps * self._env.num_envs,
        frames=self.env_steps * frames_per_batch_step, episodes=self.episodes,
        window_returns=returns, frames_per_s=steps * frames_per_batch_step / span,
        param_version=self.param_version, elapsed_s=elapsed, timers=timers, span=span,
        unrolls=self.unrolls, **self._policy.stats(), **extra)
    self._logger(dict(record, **fields) if fields else record)
