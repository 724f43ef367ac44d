"""The T-maze of paper 002 ("Attention or memory?", after Okada et al. 2017): a figure-8 memory task.

Walkable cells form a figure 8 inside a 9 x 7 grid (x to the right, y down): the top and
bottom rows, the left and right columns and the central column x = 4. The agent starts
at the bottom of the central column, (4, 6), and moves up, right, down or left (or
stays: action 0); a move into a wall leaves it in place. Rewards wait in the top
corners L = (0, 0) and R = (8, 0). The optimal path is the figure 8: up the centre,
along the top to one corner (reward), down that side, back along the bottom, up the
centre again and to the other corner (reward), and so on: one reward every 20 steps.

The rules, as 002 describes them (our reading where it is brief):
- A corner pays +1 when entered from the top row (coming from the centre), while the
  maze is armed and it is the expected side: the side other than the last reward's
  (either side before the first reward).
- Coming from the centre means the agent has passed the bottom of the central column
  since its last corner entry (the start counts). Without this, shuttling along the top
  row from corner to corner paid every 8 steps (a PPO agent found it: 12.8 per episode
  where the figure 8 pays 10); it is a wrong approach and resets. Returning down the
  centre instead of a side is as long as the figure 8, so the optimum stays 1 / 20 steps.
- Entering a corner from its side column (the wrong side), or going to the corner that
  just paid (the wrong reward location), resets the maze: nothing is paid, and the
  maze is disarmed until the agent completes a figure 8 without reward — two correct
  corner entries on alternating sides. Then it is armed again, expecting the side
  opposite to the last corner entered. The agent keeps its position through a reset.

Observation: uint8 [5, 5, 3], the cells within radius 2 of the agent: channel 0 walls
(also outside the grid), channel 1 a collectible reward (the expected corner(s) while
armed), channel 2 the agent (the centre). Values are 0 or 255. Episodes last
`max_steps` steps; like Catch, the last step carries the reward, discount 0, `last` and
`is_first` together, and already shows the next episode's first observation.
"""

from typing import Optional

import numpy as np

from s3ta.envs.base import EnvStep, checked_actions

WIDTH, HEIGHT = 9, 7
CENTRE_X = WIDTH // 2
START = (CENTRE_X, HEIGHT - 1)
LEFT_CORNER, RIGHT_CORNER = (0, 0), (WIDTH - 1, 0)
RADIUS = 2
MOVES = ((0, 0), (0, -1), (1, 0), (0, 1), (-1, 0))  # no-op, up, right, down, left
OPTIMAL_STEPS_PER_REWARD = 20


def walkable() -> np.ndarray:
  """[HEIGHT, WIDTH] bool: the figure-8 corridors."""
  grid = np.zeros((HEIGHT, WIDTH), bool)
  grid[0, :] = grid[-1, :] = True
  grid[:, 0] = grid[:, -1] = grid[:, CENTRE_X] = True
  return grid


class TMaze:
  """One T-maze: position and the reward state machine (see the module docstring)."""

  def __init__(self):
    self._walkable = walkable()
    self.reset()

  def reset(self) -> None:
    self.position = START
    self.armed = True
    self.expected: Optional[tuple[int, int]] = None  # None: either corner
    self.unrewarded: list[tuple[int, int]] = []  # correct entries since a reset
    self.via_centre = True  # passed the bottom of the centre column since the last corner
    self.resets = 0

  def _corner_entered(self, corner, previous) -> float:
    other = RIGHT_CORNER if corner == LEFT_CORNER else LEFT_CORNER
    from_top_row = previous[1] == 0  # entered along the top row, from the centre
    came_from_centre, self.via_centre = self.via_centre, False
    if not (from_top_row and came_from_centre):
      return self._reset()
    if not self.armed:
      if self.unrewarded and self.unrewarded[-1] == corner:
        return self._reset()  # the same corner twice: not a figure 8
      self.unrewarded.append(corner)
      if len(self.unrewarded) == 2:  # a figure 8 completed without reward: armed again
        self.armed, self.expected, self.unrewarded = True, other, []
      return 0.0
    if self.expected not in (None, corner):
      return self._reset()  # the wrong reward location
    self.expected = other
    return 1.0

  def _reset(self) -> float:
    self.armed, self.expected, self.unrewarded = False, None, []
    self.resets += 1
    return 0.0

  def step(self, action: int) -> float:
    dx, dy = MOVES[action]
    x, y = self.position[0] + dx, self.position[1] + dy
    if not (0 <= x < WIDTH and 0 <= y < HEIGHT and self._walkable[y, x]):
      return 0.0  # blocked
    previous, self.position = self.position, (x, y)
    if self.position == START:
      self.via_centre = True
    if self.position in (LEFT_CORNER, RIGHT_CORNER) and previous != self.position:
      return self._corner_entered(self.position, previous)
    return 0.0

  def observation(self) -> np.ndarray:
    size = 2 * RADIUS + 1
    frame = np.zeros((size, size, 3), np.uint8)
    frame[RADIUS, RADIUS, 2] = 255
    visible = [c for c in (LEFT_CORNER, RIGHT_CORNER)
               if self.armed and self.expected in (None, c)]
    for row in range(size):
      for col in range(size):
        x, y = self.position[0] + col - RADIUS, self.position[1] + row - RADIUS
        if not (0 <= x < WIDTH and 0 <= y < HEIGHT and self._walkable[y, x]):
          frame[row, col, 0] = 255
        elif (x, y) in visible:
          frame[row, col, 1] = 255
    return frame


class BatchedTMaze:
  """B independent T-mazes stepped together (the `BatchedEnv` interface)."""

  num_actions = len(MOVES)
  observation_shape = (2 * RADIUS + 1, 2 * RADIUS + 1, 3)

  def __init__(self, num_envs: int, max_steps: int = 200, seed: int = 0):
    if num_envs < 1:
      raise ValueError(f'num_envs must be >= 1, got {num_envs}.')
    if max_steps < 1:
      raise ValueError(f'tmaze max_steps must be >= 1, got {max_steps}.')
    del seed  # the maze is deterministic
    self.num_envs, self.max_steps = num_envs, max_steps
    self._mazes = [TMaze() for _ in range(num_envs)]
    self._steps = np.zeros(num_envs, np.int64)

  def _observations(self) -> np.ndarray:
    return np.stack([maze.observation() for maze in self._mazes])

  def reset(self) -> EnvStep:
    for maze in self._mazes:
      maze.reset()
    self._steps[:] = 0
    zeros = np.zeros(self.num_envs, np.float32)
    return EnvStep(self._observations(), zeros, zeros.copy(), np.ones(self.num_envs, bool),
                   np.zeros(self.num_envs, bool))

  def step(self, actions) -> EnvStep:
    actions = checked_actions(actions, self.num_envs, self.num_actions)
    reward = np.asarray([maze.step(int(a)) for maze, a in zip(self._mazes, actions)], np.float32)
    self._steps += 1
    done = self._steps >= self.max_steps
    for i in np.flatnonzero(done):
      self._mazes[i].reset()
      self._steps[i] = 0
    return EnvStep(self._observations(), reward, (~done).astype(np.float32), done.copy(), done)

  def close(self) -> None:
    pass
