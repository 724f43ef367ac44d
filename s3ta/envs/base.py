"""The batched-environment interface every environment wrapper implements.

Environments auto-reset. `EnvStep` is what a batch of B environments returns after
`reset()` or `step(actions)`:

- `reward`/`discount` belong to the transition that produced this observation;
  `discount` is 0 when no value may be bootstrapped through that transition (the
  episode ended, or the observation is the first of a new episode).
- `is_first` marks observations that start an episode (the agent resets its state).
- `last` marks the step whose reward closes an episode (for episode-return logging).

Catch resets within the terminal step (is_first, last and discount 0 together);
EnvPool returns the terminal observation first and the new episode one (dummy)
step later; both fit these rules.
"""

from typing import Any, NamedTuple, Protocol

import numpy as np


class EnvStep(NamedTuple):
  observation: Any  # uint8 [B, H, W, C]
  reward: Any  # float32 [B], unclipped
  discount: Any  # float32 [B] in {0, 1}
  is_first: Any  # bool [B]
  last: Any  # bool [B]


class BatchedEnv(Protocol):
  num_envs: int
  num_actions: int
  observation_shape: tuple[int, int, int]

  def reset(self) -> EnvStep:
    ...

  def step(self, actions: np.ndarray) -> EnvStep:
    ...

  def close(self) -> None:
    ...


def checked_actions(actions, num_envs: int, num_actions: int) -> np.ndarray:
  """`actions` as an array, or ValueError unless they are `num_envs` ints in [0, num_actions)."""
  actions = np.asarray(actions)
  if actions.shape != (num_envs,) or np.any((actions < 0) | (actions >= num_actions)):
    raise ValueError(f'actions must be {num_envs} ints in [0, {num_actions}), got {actions!r}.')
  return actions


class EpisodeTracker:
  """Accumulates per-environment returns and lengths; yields finished episodes."""

  def __init__(self, num_envs: int):
    self._returns = np.zeros(num_envs, np.float64)
    self._lengths = np.zeros(num_envs, np.int64)

  def update(self, env_step: EnvStep) -> list[tuple[float, int]]:
    """Adds one step's rewards; returns (return, length) of episodes that ended."""
    self._returns += env_step.reward
    self._lengths += 1
    done = np.asarray(env_step.last, bool)
    finished = [(float(r), int(n)) for r, n in zip(self._returns[done], self._lengths[done])]
    self._returns[done] = 0.0
    self._lengths[done] = 0
    return finished
