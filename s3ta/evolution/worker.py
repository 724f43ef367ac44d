"""A rollout worker: scores candidate vectors by playing their episodes (one process, one role).

The same class runs as a Launchpad courier node (`launch/evolve.py`, distributed) and
inside a local worker process (`s3ta/evolution/dispatch.py`, single machine). It builds
`config.envs_per_worker` environments once and keeps them between calls.
"""

import atexit
import os
from typing import Any

import numpy as np

from s3ta.acting.policy import decode_arrays, encode_arrays
from s3ta.envs import vision_tasks
from s3ta.evolution import policy, rollouts


class RolloutWorker:
  """Plays episodes for the controller; `score` is its only work call."""

  def __init__(self, config: Any):
    task_kwargs = vision_tasks.task_fields(config.task)
    self._tasks = [vision_tasks.make_task(**task_kwargs) for _ in range(config.envs_per_worker)]
    self.agent = policy.FlatAgent(policy.agent_config(
        config.agent, vision_tasks.OUTPUT_SIZES[task_kwargs['name']]), seed=config.seed)
    atexit.register(self.close)  # VizDoom's engine processes outlive a worker that does not close them

  def score(self, vectors, seeds) -> tuple:
    """vectors [k, P], seeds int [k, r] -> (returns float64 [k, r], environment steps played).

    Candidate i plays one episode per seed in row i of `seeds`.
    """
    vectors = np.asarray(vectors, np.float32)
    seeds = np.asarray(seeds, np.int64)
    if seeds.ndim != 2 or seeds.shape[0] != vectors.shape[0]:
      raise ValueError(f'seeds must be [{vectors.shape[0]}, rollouts], got {seeds.shape}.')
    jobs = [rollouts.Job(i, int(s)) for i in range(seeds.shape[0]) for s in seeds[i]]
    results = rollouts.play(self._tasks, self.agent, vectors, jobs)
    return results.returns.reshape(seeds.shape), int(results.steps.sum())

  def score_encoded(self, request: dict) -> dict:
    """`score` over the courier wire: arrays as `encode_arrays` triples both ways."""
    arrays = decode_arrays(request)
    returns, steps = self.score(arrays['vectors'], arrays['seeds'])
    return encode_arrays({'returns': returns, 'steps': np.array(steps, np.int64)})

  def pid(self) -> int:
    return os.getpid()

  def close(self) -> None:
    for task in self._tasks:
      task.close()
    self._tasks = []
