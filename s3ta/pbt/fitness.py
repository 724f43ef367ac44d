"""Fitness of a member: mean capped human-normalised score over its recent episodes.

Multi-level (paper 000, App. A.2): each game keeps its own window of recent
episodes; a game's score is the mean of its capped human-normalised episode
scores, and the fitness is the mean over the games that have episodes, so games
with short episodes do not outweigh the others.
"""

import collections
from typing import Callable, Optional

import numpy as np

from s3ta.envs import human_scores

Normalizer = Callable[[str, float], float]  # (game, episode return) -> fraction of human


def default_normalizer() -> Normalizer:
  """`s3ta.envs.human_scores.human_normalized_score` (1.0 = human level)."""
  return human_scores.human_normalized_score


class FitnessTracker:
  """Recent episodes per game and the fitness computed from them."""

  def __init__(self, window: int = 100, cap: float = 1.0, normalizer: Optional[Normalizer] = None):
    if window < 1:
      raise ValueError(f'fitness window must be >= 1 episode, got {window}.')
    self._window = window
    self._cap = cap
    self._normalizer = normalizer
    self._returns = collections.defaultdict(lambda: collections.deque(maxlen=self._window))
    self.total_episodes = 0

  def _normalize(self, game: str, episode_return: float) -> float:
    if self._normalizer is None:
      self._normalizer = default_normalizer()
    return float(self._normalizer(game, episode_return))

  def add(self, game: str, episode_return: float) -> None:
    self._returns[game].append(float(episode_return))
    self.total_episodes += 1

  def reset(self) -> None:
    """Forgets the window (after an exploit the episodes belong to the old weights)."""
    self._returns.clear()

  @property
  def num_episodes(self) -> int:
    return sum(len(v) for v in self._returns.values())

  def per_game(self) -> dict:
    out = {}
    for game, returns in sorted(self._returns.items()):
      if not returns:
        continue
      scores = [self._normalize(game, r) for r in returns]
      out[game] = {'episodes': len(returns), 'mean_return': float(np.mean(returns)),
                   'mean_hns': float(np.mean(scores)),
                   'mean_capped_hns': float(np.mean(np.minimum(scores, self._cap)))}
    return out

  def fitness(self) -> Optional[float]:
    games = self.per_game()
    if not games:
      return None
    return float(np.mean([g['mean_capped_hns'] for g in games.values()]))

  def summary(self, frames: int) -> dict:
    """The `get_fitness()` answer of a member (see `controller.Member`)."""
    return {'frames': int(frames), 'fitness': self.fitness(), 'num_episodes': self.num_episodes,
            'per_game': self.per_game()}
