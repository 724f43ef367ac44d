"""CarRacing (gymnasium, Box2D) as a paper-004 vision task, with its three modified variants.

The agent's three outputs in [-1, 1] become steering (as is), gas and brake (mapped to
[0, 1]). Reward: +1000/n per new track tile, -0.1 per step; an episode ends when the lap
is done, the car leaves the playfield, or after `max_steps` (004: 1000). Modifications
(004 section 5.5):
- color_perturb: at each reset two scalars drawn uniformly from [-0.2, 0.2] (of full scale)
  are added to the lane colour and to the grass/background colour; they stay for the episode.
- vertical_bars: black bars on both sides, 75 px of the 1000-px-wide window each
  (7 of 96 columns in the observation).
- background_blob: a red disc at a fixed position north-east of the car. The camera
  follows and turns with the car, so a fixed place in the frame is fixed relative to it.
Bars and blob are drawn over the rendered 96 x 96 frame.
"""

import os

os.environ.setdefault('PYGAME_HIDE_SUPPORT_PROMPT', '1')  # no banner in every worker's log

# pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np
import pygame
from gymnasium.envs.box2d import car_racing as gym_car_racing
from pygame import gfxdraw
# pylint: enable=g-import-not-at-top,wrong-import-position

from s3ta.envs import vision_tasks

BAR_WIDTH = round(75 / 1000 * vision_tasks.OBSERVATION_SIZE)  # 7 columns
BLOB_CENTRE = (36, 70)  # (row, column); the car sits near (70, 48), pointing up
BLOB_RADIUS = 7
BLOB_COLOUR = (255, 0, 0)
COLOUR_SHIFT = 0.2  # colour perturbation: U[-0.2, 0.2] of full scale


def _ground_constants() -> tuple[np.ndarray, np.ndarray]:
  """World vertices of gymnasium's background field [4, 2] and grass patches [400, 4, 2]."""
  bound, dim = gym_car_racing.PLAYFIELD, gym_car_racing.GRASS_DIM
  field = np.array([(bound, bound), (bound, -bound), (-bound, -bound), (-bound, bound)])
  corners = np.array([(dim, 0.0), (0.0, 0.0), (0.0, dim), (dim, dim)])
  cells = [(dim * x, dim * y) for x in range(-20, 20, 2) for y in range(-20, 20, 2)]
  return field, np.array(cells)[:, None, :] + corners[None]


_FIELD, _GRASS = _ground_constants()


class _CarRacing(gym_car_racing.CarRacing):
  """CarRacing whose road and grass are transformed and culled in numpy: the same pixels, 1.85x faster.

  Gymnasium turns, scales and culls each of its ~800 ground polygons in Python on every
  step, which is most of the 15 ms a step costs. Here one array operation does it; the
  rotation uses the cosine and sine that pygame's `rotate_rad` computes for this angle
  (read back by rotating a unit vector), then the same float64 operations in the same
  order, so the polygons drawn, their order and their coordinates are bit-identical
  (`tests/test_vision_tasks.py` compares frames).
  """

  _road_cache = (None, None)  # (the track's road_poly list, its vertices [n, 4, 2])

  def _road(self) -> np.ndarray:
    """The road polygons' world vertices, rebuilt when a reset makes a new track."""
    if self._road_cache[0] is not self.road_poly:
      vertices = np.array([poly for poly, _ in self.road_poly], np.float64).reshape(-1, 4, 2)
      self._road_cache = (self.road_poly, vertices)
    return self._road_cache[1]

  def _render_road(self, zoom, translation, angle):
    cos, sin = pygame.math.Vector2(1.0, 0.0).rotate_rad(angle)  # pygame's own, bit for bit

    def to_screen(vertices: np.ndarray) -> np.ndarray:
      x, y = vertices[..., 0], vertices[..., 1]
      return np.stack([(cos * x - sin * y) * zoom + translation[0],
                       (sin * x + cos * y) * zoom + translation[1]], axis=-1)

    def visible(screen: np.ndarray) -> np.ndarray:
      margin = gym_car_racing.MAX_SHAPE_DIM
      inside = ((-margin <= screen[..., 0]) & (screen[..., 0] <= gym_car_racing.WINDOW_W + margin) &
                (-margin <= screen[..., 1]) & (screen[..., 1] <= gym_car_racing.WINDOW_H + margin))
      return np.flatnonzero(inside.any(axis=-1))

    def draw(polygon: np.ndarray, colour) -> None:
      points = [tuple(point) for point in polygon.tolist()]
      gfxdraw.aapolygon(self.surf, points, colour)
      gfxdraw.filled_polygon(self.surf, points, colour)

    draw(to_screen(_FIELD), self.bg_color)  # the background is never culled
    grass_screen = to_screen(_GRASS)
    for i in visible(grass_screen):
      draw(grass_screen[i], self.grass_color)
    road = self._road()
    if len(road):
      road_screen = to_screen(road)
      for i in visible(road_screen):  # colours change as tiles are visited: read them now
        draw(road_screen[i], [int(c) for c in self.road_poly[i][1]])


class _PerturbedColours(_CarRacing):
  """CarRacing whose lane and grass colours are shifted by 004's two scalars at each reset.

  Gymnasium recolours at reset only in its domain-randomised mode, through
  `_reinit_colors`; this subclass turns that mode on and replaces the recolouring.
  """

  def __init__(self, **kwargs):
    super().__init__(domain_randomize=True, **kwargs)

  def _reinit_colors(self, randomize):
    del randomize  # always: a new perturbation per episode
    lane, grass = self.np_random.uniform(-COLOUR_SHIFT, COLOUR_SHIFT, size=2) * 255.0
    self.road_color = np.clip(np.array([102.0, 102.0, 102.0]) + lane, 0, 255)
    self.bg_color = np.clip(np.array([102.0, 204.0, 102.0]) + grass, 0, 255)
    self.grass_color = np.clip(np.array([102.0, 230.0, 102.0]) + grass, 0, 255)


def _disc_mask(size: int, centre, radius: int) -> np.ndarray:
  rows, cols = np.ogrid[:size, :size]
  return (rows - centre[0]) ** 2 + (cols - centre[1]) ** 2 <= radius ** 2


class CarRacingTask:
  """One CarRacing environment; see the module docstring."""
  name = 'car_racing'
  output_size = 3

  def __init__(self, modification: str = 'none', *, max_steps: int = 1000,
               negative_reward_patience: int = 0):
    vision_tasks.validate(self.name, modification, max_steps)
    self.modification = modification
    self._max_steps = max_steps
    self._patience = negative_reward_patience
    if modification == 'color_perturb':
      self._env = _PerturbedColours(continuous=True)
    else:
      self._env = _CarRacing(continuous=True)
    self._blob = _disc_mask(vision_tasks.OBSERVATION_SIZE, BLOB_CENTRE, BLOB_RADIUS)
    self._steps = self._negative_run = 0

  def _observe(self, frame: np.ndarray) -> np.ndarray:
    frame = np.array(vision_tasks.resize(frame))
    if self.modification == 'vertical_bars':
      frame[:, :BAR_WIDTH] = 0
      frame[:, -BAR_WIDTH:] = 0
    elif self.modification == 'background_blob':
      frame[self._blob] = BLOB_COLOUR
    return frame

  def reset(self, seed: int) -> np.ndarray:
    frame, _ = self._env.reset(seed=int(seed))
    self._steps = self._negative_run = 0
    return self._observe(frame)

  @staticmethod
  def action(output: np.ndarray) -> np.ndarray:
    """[-1, 1]^3 -> (steer in [-1, 1], gas in [0, 1], brake in [0, 1])."""
    output = np.clip(np.asarray(output, np.float64), -1.0, 1.0)
    return np.array([output[0], (output[1] + 1.0) / 2.0, (output[2] + 1.0) / 2.0], np.float32)

  def step(self, output: np.ndarray) -> vision_tasks.TaskStep:
    frame, reward, terminated, truncated, _ = self._env.step(self.action(output))
    self._steps += 1
    self._negative_run = self._negative_run + 1 if reward < 0 else 0
    done = (terminated or truncated or self._steps >= self._max_steps or
            0 < self._patience <= self._negative_run)
    return vision_tasks.TaskStep(self._observe(frame), float(reward), bool(done))

  def close(self) -> None:
    self._env.close()

