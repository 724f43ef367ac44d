"""Whole episodes of many (candidate, seed) jobs, played in lockstep on a few environments.

A worker owns `len(tasks)` environments. Each holds one job at a time; all of them step
together, with one jitted agent call for the batch (each slot with its own candidate's
vector and LSTM state). When an episode ends, its slot takes the next job. Idle slots
(fewer jobs left than environments) keep the batch shape fixed and are ignored.
"""

from typing import Callable, NamedTuple, Optional, Sequence

import jax
import numpy as np

from s3ta.envs.vision_tasks import VisionTask
from s3ta.evolution.policy import FlatAgent


class Job(NamedTuple):
  candidate: int  # row of the vectors array
  seed: int  # episode seed


class Results(NamedTuple):
  returns: np.ndarray  # float64 [jobs]
  steps: np.ndarray  # int64 [jobs], environment steps of each episode


# (job index, observation the agent saw, the agent's step for that slot) after every step
StepObserver = Callable[[int, np.ndarray, object], None]


def play(tasks: Sequence[VisionTask], agent: FlatAgent, vectors: np.ndarray,
         jobs: Sequence[Job], observer: Optional[StepObserver] = None) -> Results:
  """Plays every job's episode to its end; returns per-job return and length."""
  vectors = np.asarray(vectors, np.float32)
  if vectors.ndim != 2 or vectors.shape[1] != agent.size:
    raise ValueError(f'vectors must be [candidates, {agent.size}], got {vectors.shape}.')
  for job in jobs:
    if not 0 <= job.candidate < len(vectors):
      raise ValueError(f'job {job} names candidate {job.candidate} of {len(vectors)}.')
  slots = len(tasks)
  returns = np.zeros(len(jobs), np.float64)
  steps = np.zeros(len(jobs), np.int64)
  size = agent.config.image_size
  images = np.zeros((slots, size, size, 3), np.uint8)
  slot_job = [-1] * slots
  carry = [np.array(c) for c in agent.initial_carry(slots)]
  pending = iter(range(len(jobs)))

  def start(slot: int) -> None:
    index = next(pending, -1)
    slot_job[slot] = index
    if index >= 0:
      images[slot] = tasks[slot].reset(jobs[index].seed)
      for c in carry:
        c[slot] = 0.0

  for slot in range(slots):
    start(slot)
  while any(index >= 0 for index in slot_job):
    rows = np.array([jobs[i].candidate if i >= 0 else 0 for i in slot_job])
    new_carry, out = agent.step(vectors[rows], tuple(carry), images)
    carry = [np.array(c) for c in new_carry]
    actions = np.asarray(out.action)
    if observer is not None:
      out_host = jax.device_get(out)
    for slot, index in enumerate(slot_job):
      if index < 0:
        continue
      if observer is not None:
        observer(index, images[slot].copy(), jax.tree_util.tree_map(lambda x: x[slot], out_host))
      result = tasks[slot].step(actions[slot])
      returns[index] += result.reward
      steps[index] += 1
      images[slot] = result.observation
      if result.done:
        start(slot)
  return Results(returns, steps)
