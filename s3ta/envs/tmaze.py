"""The T-maze of paper 002 ("Attention or memory?", after Okada et al. 2017): a figure-8 memory task.

Walkable cells form a figure 8 inside a 9 x 7 grid (x to the right, y down): the top and
bottom rows, the left and right columns and the central column x = 4. The agent starts
at the bottom of the central column, (4, 6), and moves up, right, down or left (or
stays: action 0); a move into a wall leaves it in place. Rewards wait in the top
corners L = (0, 0) and R = (8, 0). The optimal path is the figure 8: up the centre,
along the top to one corner (reward), down that side, back along the bottom, up the
centre again and to the other corner (reward), and so on: one reward every 20 steps.

The rules: 002 names two mistakes, and only they reset the maze.
- A corner pays +1 when the agent, having come up the central column from its bottom,
  reaches the top and turns to the corner that holds the reward: the side other than
  the last reward's (either side before the first reward). Coming up means stepping from
  (4, 1) onto the top row after passing (4, 6) (the start counts) since the last corner.
- Mistake 1, "the reward location approached from the wrong side": entering the corner
  that holds the reward from its side column. Mistake 2, "reaches the top, but elects
  to go towards the wrong reward location": coming up the centre and turning to the other
  corner. Either resets the maze: nothing is paid, and the maze is disarmed until the
  agent completes a figure 8 without reward — two corners reached by coming up the
  centre, on alternating sides. Then it is armed again, expecting the side opposite to
  the last of them. The agent keeps its position through a reset.
- Any other corner entry is neutral: it pays nothing, resets nothing, and ends the trip
  (the agent must pass the bottom of the centre again). So stepping back into the corner
  that just paid, or shuttling along the top row from corner to corner (which paid every
  8 steps under a reading without the "come up the centre" condition, and a PPO agent
  found it), earns nothing. The optimum stays one reward per 20 steps.
  An earlier reading (before commit 11a52a6) also reset on these neutral entries; under it
  a uniformly random policy had no second reward in 99.6 % of 1,000-step episodes,
  because one stray step back into a corner demanded a full unrewarded figure 8.
- `route='any'` (the default) lets any way onto the bottom of the centre count, so the T
  route — from the corner back along the top row, down the centre and up again — pays like
  the figure 8, also one reward per 20 steps; attention agents take it (BENCHMARKS.md,
  T-maze routes). `route='figure8'` counts the bottom of the centre only when entered along
  the bottom row (or started on), as 002's "specific sequence of moves (a figure-8)" reads:
  the T route then pays nothing, and with a detour through the bottom row 22 steps.

Observation: uint8 [5, 5, 3], the cells within radius 2 of the agent: channel 0 walls
(also outside the grid), channel 1 a collectible reward (the expected corner(s) while
armed), channel 2 the agent (the centre). Values are 0 or 255. Episodes last
`max_steps` steps; like Catch, the last step carries the reward, discount 0, `last` and
`is_first` together, and already shows the next episode's first observation.

Start cell: 002 does not state one. `start='centre'` (the default) puts the agent at the
bottom of the central column, where the first reward is one walk up the centre away;
`start='random'` draws a walkable cell per episode (seeded), so the first reward can need
the loop's far half (down a side, along the bottom, up the centre) — the part of the
figure 8 that agents starting at the centre never learned (BENCHMARKS.md, T-maze). A
random start has not passed the bottom of the centre, unless it is that cell.

Events: each maze tallies what its steps did in the current episode (`EVENTS`: moves,
blocked moves, no-ops, reversals, rewards, the two mistakes, neutral corner entries, correct
entries while disarmed), where and which way moves were blocked, and the longest run of steps
in place, so an analysis can say why an agent scores below the optimum
(`python -m s3ta.analysis tmaze-events`).
"""

import collections
from typing import NamedTuple, Optional

import numpy as np

from s3ta.envs.base import EnvStep, checked_actions

WIDTH, HEIGHT = 9, 7
CENTRE_X = WIDTH // 2
START = (CENTRE_X, HEIGHT - 1)
LEFT_CORNER, RIGHT_CORNER = (0, 0), (WIDTH - 1, 0)
RADIUS = 2
MOVES = ((0, 0), (0, -1), (1, 0), (0, 1), (-1, 0))  # no-op, up, right, down, left
MOVE_NAMES = ('noop', 'up', 'right', 'down', 'left')
OPTIMAL_STEPS_PER_REWARD = 20
STARTS = ('centre', 'random')
# What counts as having passed the bottom of the centre column before coming up it:
# 'any' way onto its bottom cell (so the T route, back along the top row, down the centre
# and up again, is paid like the figure 8: 20 steps per reward too), or only 'figure8':
# onto it along the bottom row (or starting there), so only the figure 8's lower loop counts.
ROUTES = ('any', 'figure8')
# What a step can do, tallied per episode in `TMaze.events`.
# `reversal` is a move straight back to the previous cell (a subset of `move`; the figure 8
# never reverses), so moves wasted on dithering show apart from blocked ones. `centre_down`
# is a move down the centre column (a subset of `move`): the figure 8 never makes one, the
# T route (back along the top row, down the centre and up again) makes six per reward.
EVENTS = ('move', 'blocked', 'noop', 'reversal', 'centre_down', 'reward', 'wrong_side',
          'wrong_corner', 'neutral_corner', 'disarmed_corner')
FINISHED_EPISODES_KEPT = 1024


class EpisodeTally(NamedTuple):
  """What one finished episode of one maze did (`BatchedTMaze.pop_finished_episodes`)."""
  maze: int  # index in the batch
  events: dict  # EVENTS -> count
  blocked_at: dict  # (x, y, action) -> moves blocked there in that direction
  longest_stall: int  # most consecutive steps that left the cell unchanged (blocked, no-op)
  reversed_at: dict  # (x, y, action) -> moves straight back made from there in that direction


def walkable() -> np.ndarray:
  """[HEIGHT, WIDTH] bool: the figure-8 corridors."""
  grid = np.zeros((HEIGHT, WIDTH), bool)
  grid[0, :] = grid[-1, :] = True
  grid[:, 0] = grid[:, -1] = grid[:, CENTRE_X] = True
  return grid


def _other(corner: tuple[int, int]) -> tuple[int, int]:
  return RIGHT_CORNER if corner == LEFT_CORNER else LEFT_CORNER


class TMaze:
  """One T-maze: position and the reward state machine (see the module docstring)."""

  def __init__(self, start: str = 'centre', seed=0, route: str = 'any'):  # seed: int or SeedSequence
    if start not in STARTS:
      raise ValueError(f'Unknown tmaze start {start!r}; valid: {STARTS}.')
    if route not in ROUTES:
      raise ValueError(f'Unknown tmaze route {route!r}; valid: {ROUTES}.')
    self._route = route
    self._walkable = walkable()
    self._start = start
    self._cells = [(int(x), int(y)) for y, x in zip(*np.nonzero(self._walkable))]
    self._rng = np.random.default_rng(seed)
    self.reset()

  def reset(self) -> None:
    if self._start == 'random':
      self.position = self._cells[self._rng.integers(len(self._cells))]
    else:
      self.position = START
    self.armed = True
    self.expected: Optional[tuple[int, int]] = None  # None: either corner
    self.unrewarded: list[tuple[int, int]] = []  # correct entries since a reset
    # Passed the bottom of the centre column since the last corner (the start counts).
    self.via_centre = self.position == START
    self.came_up_the_centre = False  # on the top row, having come up the centre from its bottom
    self.last_move: Optional[int] = None  # the action of the last move that changed the cell
    self.events = collections.Counter({event: 0 for event in EVENTS})
    # (x, y, action) -> moves blocked there in that direction
    self.blocked_at: collections.Counter = collections.Counter()
    # (x, y, action) -> moves from there straight back to the previous cell
    self.reversed_at: collections.Counter = collections.Counter()
    self.stall, self.longest_stall = 0, 0  # consecutive steps in place: now, and the most

  @property
  def resets(self) -> int:
    """Mistakes this episode: each reset the maze."""
    return self.events['wrong_side'] + self.events['wrong_corner']

  def _targets(self) -> tuple:
    """The corners whose approach counts: the reward's, or the figure 8's next while disarmed."""
    if self.armed:
      return (LEFT_CORNER, RIGHT_CORNER) if self.expected is None else (self.expected,)
    if not self.unrewarded:
      return LEFT_CORNER, RIGHT_CORNER
    return (_other(self.unrewarded[-1]),)

  def _corner_entered(self, corner, previous) -> float:
    came_up_the_centre, self.came_up_the_centre, self.via_centre = (
        self.came_up_the_centre, False, False)
    targets = self._targets()
    if previous[1] != 0:  # from the side column
      if corner in targets:
        return self._reset('wrong_side')
      self.events['neutral_corner'] += 1
      return 0.0
    if not came_up_the_centre:
      self.events['neutral_corner'] += 1  # along the top row without the choice at the top
      return 0.0
    if corner not in targets:
      return self._reset('wrong_corner')  # the wrong reward location
    if not self.armed:
      self.events['disarmed_corner'] += 1
      self.unrewarded.append(corner)
      if len(self.unrewarded) == 2:  # a figure 8 completed without reward: armed again
        self.armed, self.expected, self.unrewarded = True, _other(corner), []
      return 0.0
    self.events['reward'] += 1
    self.expected = _other(corner)
    return 1.0

  def _reset(self, mistake: str) -> float:
    self.armed, self.expected, self.unrewarded = False, None, []
    self.events[mistake] += 1
    return 0.0

  def _stay(self, event: str) -> float:
    """A step that leaves the cell unchanged (a no-op or a blocked move)."""
    self.events[event] += 1
    self.stall += 1
    self.longest_stall = max(self.longest_stall, self.stall)
    return 0.0

  def step(self, action: int) -> float:
    dx, dy = MOVES[action]
    x, y = self.position[0] + dx, self.position[1] + dy
    if action == 0:
      return self._stay('noop')
    if not (0 <= x < WIDTH and 0 <= y < HEIGHT and self._walkable[y, x]):
      self.blocked_at[self.position + (int(action),)] += 1
      return self._stay('blocked')
    self.stall = 0
    self.events['move'] += 1
    if self.last_move is not None and MOVES[self.last_move] == (-dx, -dy):
      self.events['reversal'] += 1
      self.reversed_at[self.position + (int(action),)] += 1
    if x == CENTRE_X and dy == 1:
      self.events['centre_down'] += 1
    self.last_move = int(action)
    previous, self.position = self.position, (x, y)
    if self.position == START and (self._route == 'any' or previous[1] == START[1]):
      self.via_centre = True
    if previous == (CENTRE_X, 1) and y == 0:
      self.came_up_the_centre = self.via_centre  # at the top: the choice of side
    elif y != 0:
      self.came_up_the_centre = False  # left the top row
    if self.position in (LEFT_CORNER, RIGHT_CORNER):
      return self._corner_entered(self.position, previous)
    return 0.0

  def observation(self) -> np.ndarray:
    size = 2 * RADIUS + 1
    frame = np.zeros((size, size, 3), np.uint8)
    frame[RADIUS, RADIUS, 2] = 255
    visible = self._targets() if self.armed else ()
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

  def __init__(self, num_envs: int, max_steps: int = 200, seed: int = 0, start: str = 'centre',
               route: str = 'any'):
    if num_envs < 1:
      raise ValueError(f'num_envs must be >= 1, got {num_envs}.')
    if max_steps < 1:
      raise ValueError(f'tmaze max_steps must be >= 1, got {max_steps}.')
    self.num_envs, self.max_steps = num_envs, max_steps
    maze_seeds = np.random.SeedSequence(seed).spawn(num_envs)  # random starts differ per maze
    self._mazes = [TMaze(start, maze_seed, route) for maze_seed in maze_seeds]
    self._steps = np.zeros(num_envs, np.int64)
    # The latest episodes that ended, oldest first; bounded, since training never reads
    # them (`pop_finished_episodes`).
    self._finished: collections.deque = collections.deque(maxlen=FINISHED_EPISODES_KEPT)

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
      maze = self._mazes[i]
      self._finished.append(EpisodeTally(int(i), dict(maze.events), dict(maze.blocked_at),
                                         maze.longest_stall, dict(maze.reversed_at)))
      maze.reset()
      self._steps[i] = 0
    return EnvStep(self._observations(), reward, (~done).astype(np.float32), done.copy(), done)

  def pop_finished_episodes(self) -> list[EpisodeTally]:
    """The tallies of the episodes that ended since the last call (at most the latest 1024)."""
    finished = list(self._finished)
    self._finished.clear()
    return finished

  def close(self) -> None:
    pass
