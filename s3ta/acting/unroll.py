"""Turns a stream of batched environment steps into overlapping `Trajectory` unrolls.

Each unroll holds T + 1 steps; consecutive unrolls of the same environments share
one step (the last step of one is the first of the next), and each carries the
recurrent state the actor had before its first step. Shared by the single-process
loop and the distributed actors, so both produce exactly what `sgd_step` expects.
"""

from typing import Any, Optional

import jax
import numpy as np

from s3ta.types import Trajectory

STEP_FIELDS = tuple(f for f in Trajectory._fields if f != 'initial_state')


class UnrollAccumulator:
  """Collects completed steps and emits a Trajectory every `unroll_length` steps."""

  def __init__(self, unroll_length: int):
    if unroll_length < 1:
      raise ValueError(f'unroll_length must be >= 1, got {unroll_length}.')
    self._unroll_length = unroll_length
    self._steps: list[dict] = []
    self._states: list[Any] = []  # state before each buffered step

  @property
  def needs_state(self) -> bool:
    """Whether the next `add` needs its `state_before`: only a step that starts an unroll's
    [T + 1] window (the first ever, or the overlap step) keeps it; others may pass None."""
    return len(self._steps) in (0, self._unroll_length)

  def add(self, step: dict, state_before: Any) -> Optional[Trajectory]:
    """Adds one completed step and the recurrent state the actor had before it.

    Args:
      step: [B] arrays for every Trajectory field but `initial_state`.
      state_before: the AgentState pytree [B, ...] the network got at this step (None
        allowed where `needs_state` was False).
    Returns:
      a [T + 1, B] Trajectory when one is complete, else None.
    """
    missing = set(STEP_FIELDS) - set(step)
    if missing:
      raise ValueError(f'step is missing fields {sorted(missing)}.')
    if state_before is None and self.needs_state:
      raise ValueError('this step starts an unroll: its state_before is needed.')
    self._steps.append({k: np.asarray(step[k]) for k in STEP_FIELDS})
    self._states.append(state_before)
    if len(self._steps) < self._unroll_length + 1:
      return None
    trajectory = Trajectory(
        **{k: np.stack([s[k] for s in self._steps]) for k in STEP_FIELDS},
        initial_state=jax.tree_util.tree_map(np.asarray, self._states[0]))
    # The last step starts the next unroll, with the state the actor had before it.
    self._steps, self._states = self._steps[-1:], self._states[-1:]
    return trajectory
