"""Paper 004's vision tasks behind one interface: CarRacing and VizDoom TakeCover, and their modified variants.

`make_task(name, modification, ...)` returns a `VisionTask`: one environment that plays
whole episodes from a seed, shows 96 x 96 RGB frames (004 resizes every observation
to that) and takes the agent's `output_size` outputs in [-1, 1] (tanh); each task maps
them to its own action space. Modifications (004 section 5.5) are named options that
change only what is irrelevant to the task; 'none' is the original. The simulators
are imported only when a task is built, so checking a config needs neither.
"""

from typing import Any, NamedTuple, Protocol

import numpy as np
from PIL import Image

OBSERVATION_SIZE = 96  # 004: observations are resized to 96 x 96

# task -> its modifications (004 Fig. 3 and Table 4; 'other_monster' is ours)
MODIFICATIONS = {
    'car_racing': ('none', 'color_perturb', 'vertical_bars', 'background_blob'),
    'take_cover': ('none', 'higher_walls', 'floor_texture', 'hovering_text', 'other_monster'),
}
TASKS = tuple(MODIFICATIONS)
OUTPUT_SIZES = {'car_racing': 3, 'take_cover': 1}  # steer/gas/brake; one left-stay-right value
MAX_STEPS = {'car_racing': 1000, 'take_cover': 2100}  # 004 section 5.1
SOLVED_AT = {'car_racing': 900.0, 'take_cover': 750.0}  # mean over 100 episodes (004)
PAPER_SCORES = {  # 004 Table 4: mean (std) of the AttentionAgent over 100 episodes
    ('car_racing', 'none'): (914, 15), ('car_racing', 'color_perturb'): (866, 112),
    ('car_racing', 'vertical_bars'): (900, 35), ('car_racing', 'background_blob'): (898, 53),
    ('take_cover', 'none'): (1125, 589), ('take_cover', 'higher_walls'): (934, 560),
    ('take_cover', 'floor_texture'): (1120, 613), ('take_cover', 'hovering_text'): (1035, 627),
}


class TaskStep(NamedTuple):
  observation: np.ndarray  # uint8 [96, 96, 3]
  reward: float
  done: bool  # the episode ended (terminated, truncated at max_steps, or stopped early)


class VisionTask(Protocol):
  name: str
  modification: str
  output_size: int

  def reset(self, seed: int) -> np.ndarray:
    """Starts an episode determined by `seed`; returns its first observation."""

  def step(self, output: np.ndarray) -> TaskStep:
    """Applies the agent's `output` (float [output_size] in [-1, 1])."""

  def close(self) -> None:
    ...


def validate(name: str, modification: str = 'none', max_steps: int = 0) -> None:
  """ValueError naming the bad value and the allowed ones."""
  if name not in MODIFICATIONS:
    raise ValueError(f'Unknown task {name!r}; valid: {TASKS}.')
  if modification not in MODIFICATIONS[name]:
    raise ValueError(f'Unknown modification {modification!r} for task {name!r}; valid: '
                     f'{MODIFICATIONS[name]}.')
  if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 0:
    raise ValueError(f'max_steps must be an integer >= 0 (0: the task\'s own '
                     f'{MAX_STEPS[name]}), got {max_steps!r}.')


def make_task(name: str, modification: str = 'none', *, max_steps: int = 0,
              negative_reward_patience: int = 0) -> VisionTask:
  """A fresh task instance.

  Args:
    name: one of TASKS.
    modification: one of MODIFICATIONS[name].
    max_steps: episode step limit; 0 is the task's own (MAX_STEPS).
    negative_reward_patience: CarRacing only: end an episode after this many steps in a
      row without reward (off the track), a training-time saving; 0 never.
  """
  validate(name, modification, max_steps)
  steps = max_steps or MAX_STEPS[name]
  if name == 'car_racing':
    from s3ta.envs import car_racing  # pylint: disable=g-import-not-at-top  (Box2D, pygame)
    return car_racing.CarRacingTask(modification, max_steps=steps,
                                    negative_reward_patience=negative_reward_patience)
  from s3ta.envs import take_cover  # pylint: disable=g-import-not-at-top  (vizdoom)
  return take_cover.TakeCoverTask(modification, max_steps=steps)


def resize(frame: np.ndarray, size: int = OBSERVATION_SIZE) -> np.ndarray:
  """uint8 [H, W, 3] -> [size, size, 3] (bilinear); unchanged if already that size."""
  if frame.shape[:2] == (size, size):
    return frame
  return np.asarray(Image.fromarray(frame).resize((size, size), Image.BILINEAR))


def task_fields(config: Any) -> dict:
  """`make_task` keyword arguments from a config's `task` block (ConfigDict or dict)."""
  return dict(name=config['name'], modification=config['modification'],
              max_steps=int(config['max_steps']),
              negative_reward_patience=int(config['negative_reward_patience']))
