"""Which game object each attention head looks at: objects found by colour, attention mass on them.

S3TA's maps are read by eye in the videos; this module turns them into numbers. An
object is the set of pixels of one colour inside the playing field (the score and
walls share colours with the objects, so they are excluded by rows). Its box, grown by
a margin, is compared with each head's map: the mass the head puts inside the box, the
mass a uniform map would put there (the box's share of the frame), and whether the
head's peak cell lies inside it. NumPy only; the colours were read off ALE frames
(tests/test_attention_objects.py checks them on a real frame).
"""

from typing import NamedTuple, Sequence

import numpy as np

from s3ta.analysis import numerics


class GameObjects(NamedTuple):
  play_rows: tuple[int, int]  # [first, last) frame rows of the playing field
  colours: dict  # object name -> RGB of all its pixels


GAMES = {
    'Pong': GameObjects(play_rows=(34, 194), colours={
        'ball': (236, 236, 236),
        'agent paddle': (92, 186, 92),  # right, columns 140-143
        'opponent paddle': (213, 130, 74),  # left, columns 16-19
    }),
}


def game_objects(game: str) -> GameObjects:
  if game not in GAMES:
    raise ValueError(f'attention-objects has no object colours for game {game!r}; '
                     f'games with a table: {sorted(GAMES)}.')
  return GAMES[game]


def locate(frame: np.ndarray, game: str) -> dict:
  """Object name -> pixel box (y, x, height, width) in `frame` [H, W, 3], or None if not visible."""
  objects = game_objects(game)
  first, last = objects.play_rows
  field = np.asarray(frame)[first:last]
  boxes = {}
  for name, colour in objects.colours.items():
    ys, xs = np.nonzero(np.all(field == np.asarray(colour, field.dtype), axis=-1))
    if len(ys) == 0:
      boxes[name] = None
    else:
      boxes[name] = (int(ys.min()) + first, int(xs.min()), int(ys.max() - ys.min() + 1),
                     int(xs.max() - xs.min() + 1))
  return boxes


def grow(box: Sequence[int], margin: int, frame_shape: Sequence[int]) -> tuple[int, int, int, int]:
  """`box` grown by `margin` pixels on every side, clipped to the frame."""
  y, x, h, w = box
  y0, x0 = max(0, y - margin), max(0, x - margin)
  y1, x1 = min(frame_shape[0], y + h + margin), min(frame_shape[1], x + w + margin)
  return y0, x0, y1 - y0, x1 - x0


def peak_in_box(attention: np.ndarray, box: Sequence[int], frame_shape: Sequence[int]) -> np.ndarray:
  """Per head [N]: whether the centre of the head's highest-weight cell lies inside `box`."""
  attention = np.asarray(attention)
  n, h, w = attention.shape
  peak = attention.reshape(n, -1).argmax(axis=-1)
  centre_y = (peak // w + 0.5) * frame_shape[0] / h
  centre_x = (peak % w + 0.5) * frame_shape[1] / w
  y, x, bh, bw = box
  return (centre_y >= y) & (centre_y < y + bh) & (centre_x >= x) & (centre_x < x + bw)


class ObjectAttention(NamedTuple):
  """One object over T steps and N heads; steps where it is not visible are NaN."""
  mass: np.ndarray  # [T, N] attention mass inside the grown box
  uniform: np.ndarray  # [T] mass a uniform map would put there (the box's area share)
  peak: np.ndarray  # [T, N] 1.0 where the head's peak cell is inside the grown box, else 0.0

  @property
  def steps_visible(self) -> int:
    return int(np.sum(~np.isnan(self.uniform)))

  def summary(self) -> dict:
    """Means over the visible steps: mass [N], uniform (scalar), lift [N], peak share [N]."""
    mass = np.nanmean(self.mass, axis=0)
    uniform = float(np.nanmean(self.uniform))
    return {'mass': mass, 'uniform': uniform, 'lift': mass / uniform,
            'peak_share': np.nanmean(self.peak, axis=0)}


def object_attention(attention: np.ndarray, frames: np.ndarray, game: str,
                     margin: int = 16) -> dict:
  """Object name -> ObjectAttention for maps [T, N, h, w] over frames [T, H, W, 3].

  `margin` pixels are added around each object's box (16: two cells of the paper's 27 x 20
  map). A cell's receptive field is wider than its 8 x 8 pixels, so a head that sees a
  small object often peaks a cell beside it.
  """
  attention, frames = np.asarray(attention), np.asarray(frames)
  steps, heads = attention.shape[:2]
  frame_shape = frames.shape[1:3]
  names = game_objects(game).colours
  mass = {name: np.full((steps, heads), np.nan) for name in names}
  uniform = {name: np.full(steps, np.nan) for name in names}
  peak = {name: np.full((steps, heads), np.nan) for name in names}
  for t in range(steps):
    for name, box in locate(frames[t], game).items():
      if box is None:
        continue
      box = grow(box, margin, frame_shape)
      mass[name][t] = numerics.mass_in_box(attention[t], box, frame_shape)
      uniform[name][t] = box[2] * box[3] / (frame_shape[0] * frame_shape[1])  # its area share
      peak[name][t] = peak_in_box(attention[t], box, frame_shape)
  return {name: ObjectAttention(mass[name], uniform[name], peak[name]) for name in names}


def table_rows(results: dict) -> list[list]:
  """CSV rows: object, head, steps visible, mean mass, uniform mass, lift, peak share."""
  rows = []
  for name, result in results.items():
    if result.steps_visible == 0:
      continue
    summary = result.summary()
    for head in range(result.mass.shape[1]):
      rows.append([name, head, result.steps_visible, round(float(summary['mass'][head]), 4),
                   round(summary['uniform'], 4), round(float(summary['lift'][head]), 2),
                   round(float(summary['peak_share'][head]), 3)])
  return rows


TABLE_HEADER = ['object', 'head', 'steps_visible', 'mass', 'uniform_mass', 'lift', 'peak_share']


def describe(results: dict) -> list[str]:
  """One line per object: each head's mass (lift over uniform) and peak share."""
  lines = []
  for name, result in results.items():
    if result.steps_visible == 0:
      lines.append(f'{name}: never visible')
      continue
    s = result.summary()
    heads = '  '.join(f'h{n} {m:.3f} (x{l:.1f}, peak {p:.0%})' for n, (m, l, p) in
                      enumerate(zip(s['mass'], s['lift'], s['peak_share'])))
    lines.append(f'{name} (visible {result.steps_visible} steps, uniform {s["uniform"]:.3f}): {heads}')
  return lines

