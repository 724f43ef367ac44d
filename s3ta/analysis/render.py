"""Pictures for the analysis tools: labelled panels, GIFs, PNG strips and plots.

Pillow for images and animations (no ffmpeg needed), matplotlib (Agg) for plots.
Numbers come from numerics.py; nothing here computes analysis results.
"""

import os
from typing import Optional, Sequence

import matplotlib
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from s3ta.analysis import numerics

BACKGROUND = (24, 24, 24)
TEXT = (235, 235, 235)
HIGHLIGHT = (255, 220, 0)


def _font(size: int):
  try:
    path = os.path.join(matplotlib.get_data_path(), 'fonts', 'ttf', 'DejaVuSans.ttf')
    return ImageFont.truetype(path, size)
  except (ImportError, OSError):
    return ImageFont.load_default()


def as_rgb(frame: np.ndarray) -> np.ndarray:
  """[H, W, 3] for display: gray [H, W, 1] or [H, W] frames get three equal channels."""
  frame = np.asarray(frame)
  if frame.ndim == 2:
    frame = frame[..., None]
  return np.repeat(frame, 3, axis=-1) if frame.shape[-1] == 1 else frame


def scale(image: np.ndarray, factor: int) -> np.ndarray:
  """Nearest-neighbour integer upscaling of an image, as RGB [H * factor, W * factor, 3]."""
  image = as_rgb(image)
  if factor == 1:
    return image
  return image.repeat(factor, axis=0).repeat(factor, axis=1)


def banner(width: int, lines: Sequence[str], size: int = 13, colour=TEXT) -> np.ndarray:
  """A dark strip with one or more lines of text, [height, width, 3]."""
  font = _font(size)
  height = len(lines) * (size + 4) + 4
  image = Image.new('RGB', (width, height), BACKGROUND)
  draw = ImageDraw.Draw(image)
  for i, line in enumerate(lines):
    draw.text((4, 2 + i * (size + 4)), line, fill=colour, font=font)
  return np.asarray(image)


def labelled(image: np.ndarray, label, size: int = 11) -> np.ndarray:
  """The image with a caption strip (one line, or a list of lines) above it."""
  lines = [label] if isinstance(label, str) else list(label)
  return np.concatenate([banner(image.shape[1], lines, size), image], axis=0)


def hstack(images: Sequence[np.ndarray], gap: int = 4) -> np.ndarray:
  """Side by side, top-aligned, with a dark gap; pads shorter images at the bottom."""
  height = max(im.shape[0] for im in images)
  parts = []
  for i, im in enumerate(images):
    if im.shape[0] < height:
      pad = np.full((height - im.shape[0],) + im.shape[1:], BACKGROUND, np.uint8)
      im = np.concatenate([im, pad], axis=0)
    parts.append(im)
    if i + 1 < len(images):
      parts.append(np.full((height, gap, 3), BACKGROUND, np.uint8))
  return np.concatenate(parts, axis=1)


def vstack(images: Sequence[np.ndarray], gap: int = 4) -> np.ndarray:
  width = max(im.shape[1] for im in images)
  parts = []
  for i, im in enumerate(images):
    if im.shape[1] < width:
      pad = np.full((im.shape[0], width - im.shape[1], 3), BACKGROUND, np.uint8)
      im = np.concatenate([im, pad], axis=1)
    parts.append(im)
    if i + 1 < len(images):
      parts.append(np.full((gap, width, 3), BACKGROUND, np.uint8))
  return np.concatenate(parts, axis=0)


def draw_box(image: np.ndarray, box: Sequence[int], colour=HIGHLIGHT, factor: int = 1) -> np.ndarray:
  """Outline of a frame-pixel box (y, x, height, width) on a copy of the image."""
  y, x, h, w = (int(v) * factor for v in box)
  out = Image.fromarray(np.asarray(image))
  ImageDraw.Draw(out).rectangle([x - 1, y - 1, x + w, y + h], outline=colour, width=1)
  return np.asarray(out)


def head_panels(frame: np.ndarray, attention: np.ndarray, factor: int = 1,
                box: Optional[Sequence[int]] = None) -> list[np.ndarray]:
  """[frame, head 0 overlay, ...], each labelled; bright = attended."""
  frame = as_rgb(frame)
  panels = [labelled(scale(frame, factor) if box is None else draw_box(scale(frame, factor), box, factor=factor),
                     ['frame', 'as the agent sees it'])]
  for n, head in enumerate(attention):
    overlay = scale(numerics.attention_overlay(frame, head), factor)
    if box is not None:
      overlay = draw_box(overlay, box, factor=factor)
    panels.append(labelled(overlay, [f'head {n}', f'peak {head.max() * head.size:.1f}x uniform']))
  return panels


def what_where_overlay(frame: np.ndarray, difference: np.ndarray, attention: np.ndarray,
                       floor: float = 0.35, max_alpha: float = 0.8) -> np.ndarray:
  """Figure 6-style panel for one head.

  Colour = red/white/blue of D (eq. 10; red: content dominates, blue: location),
  opacity = attention / max attention, so C = D * A (eq. 11) decides what shows:
  where the head does not look, the dimmed frame shows through (and faintly everywhere,
  since the opacity stops at `max_alpha`).
  """
  frame = as_rgb(frame)
  height, width = frame.shape[:2]
  colour = numerics.red_white_blue(numerics.upsample(difference, height, width), numerics.LOG10)
  alpha = max_alpha * numerics.normalise(numerics.upsample(attention, height, width))[..., None]
  dimmed = np.asarray(frame, np.float64) * floor
  return np.clip(np.round(dimmed * (1 - alpha) + colour * alpha), 0, 255).astype(np.uint8)


def what_where_legend(width: int) -> np.ndarray:
  ramp = np.linspace(-numerics.LOG10, numerics.LOG10, max(width - 8, 2))
  bar = numerics.red_white_blue(np.repeat(ramp[None], 10, axis=0), numerics.LOG10)
  bar = np.pad(bar, ((0, 0), (4, 4), (0, 0)), constant_values=BACKGROUND[0])
  text = banner(width, ['blue: where (location) dominates x10   white: balanced   '
                        'red: what (content) dominates x10;  opacity = attention'], size=11)
  return vstack([bar, text], gap=0)


def saliency_overlay(frame: np.ndarray, saliency_frame: np.ndarray,
                     colour=(0, 255, 0)) -> np.ndarray:
  """Green saliency (normalised by its peak) on the dimmed frame, as in the paper's Figure 7."""
  dimmed = (as_rgb(frame).astype(np.float64) * 0.6).astype(np.uint8)
  return numerics.blend(dimmed, numerics.normalise(saliency_frame) * 0.85, colour=colour)


def save_gif(frames: Sequence[np.ndarray], path: str, fps: float = 10.0) -> str:
  """Animated GIF, looping; all frames must share one size."""
  if not frames:
    raise ValueError('no frames to write.')
  shapes = {f.shape for f in frames}
  if len(shapes) != 1:
    raise ValueError(f'GIF frames differ in size: {sorted(shapes)}.')
  # Per-frame 256-colour palette without dithering: 3-4x smaller and faster than
  # Pillow's default (dithered) conversion, and smooth maps stay smooth.
  images = [Image.fromarray(np.asarray(f, np.uint8)).quantize(
      colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE) for f in frames]
  images[0].save(path, save_all=True, append_images=images[1:], duration=int(round(1000 / fps)),
                 loop=0, optimize=False)
  return path


def save_png(image: np.ndarray, path: str) -> str:
  Image.fromarray(np.asarray(image, np.uint8)).save(path, optimize=True)
  return path


def pyplot():
  """matplotlib.pyplot on the file-only Agg backend (no display on servers)."""
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt


def plot_marginals(frame_attention: np.ndarray, mean_attention: np.ndarray, path: str,
                   title: str) -> str:
  """Figure 10: per head, the weight summed over rows (x marginal) and columns (y marginal).

  Bars: one frame; line: the mean over the episode. Range [0, 1] like the paper.
  """
  plt = pyplot()
  over_x, over_y = numerics.marginals(frame_attention)
  mean_x, mean_y = numerics.marginals(mean_attention)
  heads = frame_attention.shape[0]
  fig, axes = plt.subplots(2, heads, figsize=(max(2.6 * heads, 7.5), 4.8), squeeze=False)
  for n in range(heads):
    ax = axes[0, n]
    ax.bar(np.arange(over_x.shape[-1]), over_x[n], color='tab:blue', width=0.9, label='this frame')
    ax.plot(np.arange(mean_x.shape[-1]), mean_x[n], color='tab:orange', lw=1.5, label='episode mean')
    ax.set_ylim(0, 1)
    ax.set_title(f'head {n}: sum over y', fontsize=9)
    ax.set_xlabel('x (column)', fontsize=8)
    ax = axes[1, n]
    ax.barh(np.arange(over_y.shape[-1]), over_y[n], color='tab:blue', height=0.9)
    ax.plot(mean_y[n], np.arange(mean_y.shape[-1]), color='tab:orange', lw=1.5)
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_title(f'head {n}: sum over x', fontsize=9)
    ax.set_ylabel('y (row, top = 0)', fontsize=8)
  axes[0, 0].legend(fontsize=7, loc='upper right')
  fig.suptitle(title, fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=90)
  plt.close(fig)
  return path


def plot_entropy(entropy: np.ndarray, path: str, title: str, max_entropy: float) -> str:
  """Attention entropy per head over the episode, with the uniform-map maximum."""
  plt = pyplot()
  fig, ax = plt.subplots(figsize=(8, 3.4))
  for n in range(entropy.shape[1]):
    ax.plot(entropy[:, n], lw=1.2, label=f'head {n} (mean {entropy[:, n].mean():.2f})')
  ax.axhline(max_entropy, color='grey', ls='--', lw=1, label=f'uniform map, log(h*w) = {max_entropy:.2f}')
  ax.set_ylim(0, max_entropy * 1.08)
  ax.set_xlabel('agent step')
  ax.set_ylabel('entropy (nats)')
  ax.set_title(title, fontsize=9)
  ax.legend(fontsize=7, loc='lower left', ncol=2)
  fig.tight_layout()
  fig.savefig(path, dpi=90)
  plt.close(fig)
  return path


def plot_object_attention(results: dict, path: str, title: str) -> str:
  """Per head, the mean attention mass on each game object (bars) and a uniform map's (ticks)."""
  plt = pyplot()
  visible = {name: r.summary() for name, r in results.items() if r.steps_visible}
  heads = results[next(iter(results))].mass.shape[1]
  fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * heads + 2), 3.6))
  width = 0.8 / max(1, len(visible))
  for k, (name, summary) in enumerate(visible.items()):
    xs = np.arange(heads) + (k - (len(visible) - 1) / 2) * width
    bars = ax.bar(xs, summary['mass'], width=width * 0.95, label=name)
    ax.hlines(np.full(heads, summary['uniform']), xs - width / 2, xs + width / 2,
              colors=bars.patches[0].get_facecolor(), linestyles=':', lw=1.5)
  ax.set_xticks(np.arange(heads))
  ax.set_xticklabels([f'head {n}' for n in range(heads)])
  ax.set_ylim(0, 1)
  ax.set_ylabel('attention mass on the object')
  ax.set_title(title, fontsize=9)
  ax.plot([], [], 'k:', label='uniform map')
  ax.legend(fontsize=7, loc='upper right')
  fig.tight_layout()
  fig.savefig(path, dpi=90)
  plt.close(fig)
  return path


def plot_injection(steps: np.ndarray, values: np.ndarray, actions: np.ndarray, box_mass: np.ndarray,
                   window: tuple[int, int], path: str, title: str, action_labels: Sequence[str],
                   uniform_mass: Optional[float] = None) -> str:
  """Value, action and per-head attention mass on the injected box over time, window shaded."""
  plt = pyplot()
  fig, axes = plt.subplots(3, 1, figsize=(8, 6.2), sharex=True)
  for ax in axes:
    ax.axvspan(window[0] - 0.5, window[1] - 0.5, color='gold', alpha=0.3, lw=0)
  axes[0].plot(steps, values, color='tab:purple')
  axes[0].set_ylabel('value')
  axes[1].step(steps, actions, where='mid', color='tab:green')
  axes[1].set_yticks(range(len(action_labels)))
  axes[1].set_yticklabels(action_labels, fontsize=7)
  axes[1].set_ylabel('action')
  for n in range(box_mass.shape[1]):
    axes[2].plot(steps, box_mass[:, n], label=f'head {n}')
  if uniform_mass is not None:
    axes[2].axhline(uniform_mass, color='grey', ls='--', lw=1, label='uniform attention')
  axes[2].set_ylabel('attention mass\non sprite box')
  axes[2].set_xlabel('agent step (shaded: sprite injected)')
  axes[2].legend(fontsize=7, ncol=4)
  fig.suptitle(title, fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=90)
  plt.close(fig)
  return path
