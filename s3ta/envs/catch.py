"""Catch: a small pixel task for tests and CPU debugging (batched, NumPy).

A ball starts in a random column of the top row and falls one row per step; the
agent moves a paddle on the bottom row left, not at all, or right. When the ball
reaches the bottom row the episode ends with +1 if the paddle is under it, else -1.
Observations are RGB images (ball red, paddle green). Episodes last `rows - 1`
steps. Environments reset within the terminal step (see s3ta/envs/base.py).
"""

import numpy as np

from s3ta.envs.base import EnvStep, checked_actions

BALL_COLOUR = (255, 64, 64)
PADDLE_COLOUR = (64, 255, 64)


class BatchedCatch:
  """B independent Catch games stepped together."""

  num_actions = 3  # 0: left, 1: stay, 2: right

  def __init__(self, num_envs: int, rows: int = 10, columns: int = 5, pixel_scale: int = 1,
               seed: int = 0):
    if num_envs < 1:
      raise ValueError(f'num_envs must be >= 1, got {num_envs}.')
    if rows < 3 or columns < 2:
      raise ValueError(f'Catch needs rows >= 3 and columns >= 2, got {rows}x{columns}.')
    if pixel_scale < 1:
      raise ValueError(f'pixel_scale must be >= 1, got {pixel_scale}.')
    self.num_envs, self.rows, self.columns, self.pixel_scale = num_envs, rows, columns, pixel_scale
    self.observation_shape = (rows * pixel_scale, columns * pixel_scale, 3)
    self._rng = np.random.default_rng(seed)
    self._ball_row = np.zeros(num_envs, np.int64)
    self._ball_col = np.zeros(num_envs, np.int64)
    self._paddle_col = np.zeros(num_envs, np.int64)

  def _new_episodes(self, mask: np.ndarray) -> None:
    count = int(mask.sum())
    self._ball_row[mask] = 0
    self._ball_col[mask] = self._rng.integers(0, self.columns, count)
    self._paddle_col[mask] = self.columns // 2

  def _render(self) -> np.ndarray:
    frames = np.zeros((self.num_envs, self.rows, self.columns, 3), np.uint8)
    envs = np.arange(self.num_envs)
    frames[envs, self._ball_row, self._ball_col] = BALL_COLOUR
    frames[envs, self.rows - 1, self._paddle_col] = PADDLE_COLOUR
    if self.pixel_scale > 1:
      frames = frames.repeat(self.pixel_scale, axis=1).repeat(self.pixel_scale, axis=2)
    return frames

  def reset(self) -> EnvStep:
    everyone = np.ones(self.num_envs, bool)
    self._new_episodes(everyone)
    zeros = np.zeros(self.num_envs, np.float32)
    return EnvStep(self._render(), zeros, zeros.copy(), everyone, np.zeros(self.num_envs, bool))

  def step(self, actions) -> EnvStep:
    actions = checked_actions(actions, self.num_envs, self.num_actions)
    self._paddle_col = np.clip(self._paddle_col + actions - 1, 0, self.columns - 1)
    self._ball_row += 1
    done = self._ball_row == self.rows - 1
    reward = np.where(done, np.where(self._ball_col == self._paddle_col, 1.0, -1.0), 0.0)
    self._new_episodes(done)
    return EnvStep(self._render(), reward.astype(np.float32), (~done).astype(np.float32),
                   done.copy(), done)

  def close(self) -> None:
    pass
