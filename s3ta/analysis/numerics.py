"""Pure numerical functions behind the interpretability tools (paper 000, §4, A.5-A.7).

NumPy only, no rendering and no I/O, so every function here has a hand-checkable
answer in tests/test_analysis_numerics.py. Shapes follow the network's outputs:
attention [N, h, w] per head, queries [N, C_k + C_s], keys [h, w, C_k], basis
[h, w, C_s], frames uint8 [H, W, 3].
"""

from typing import Callable, NamedTuple, Sequence

import numpy as np

LOG10 = float(np.log(10.0))


# ----------------------------------------------------------------------------------------------
# What vs. where (A.5, eq. 8-11)
# ----------------------------------------------------------------------------------------------


class WhatWhere(NamedTuple):
  what: np.ndarray  # [N, h, w] eq. 8: content part of the logits, q[:C_k] . K_ij
  where: np.ndarray  # [N, h, w] eq. 9: spatial part of the logits, q[C_k:] . S_ij
  difference: np.ndarray  # [N, h, w] eq. 10: what - where clipped to [-log 10, log 10]
  contribution: np.ndarray  # [N, h, w] eq. 11: difference * attention


def what_where(queries: np.ndarray, keys: np.ndarray, basis: np.ndarray,
               attention: np.ndarray) -> WhatWhere:
  """Splits each head's attention logits into content ("what") and spatial ("where") parts.

  Args:
    queries: [N, C_k + C_s], one query per head; the first C_k channels meet the keys.
    keys: [h, w, C_k], the content keys (the first C_k ConvLSTM output channels).
    basis: [h, w, C_s], the fixed spatial basis.
    attention: [N, h, w], the attention weights used to weight the map (eq. 11).
  Returns:
    WhatWhere; `what + where` equals the attention logits of eq. 3.
  """
  queries = np.asarray(queries, np.float64)
  keys = np.asarray(keys, np.float64)
  basis = np.asarray(basis, np.float64)
  attention = np.asarray(attention, np.float64)
  key_channels = keys.shape[-1]
  if queries.ndim != 2 or queries.shape[-1] != key_channels + basis.shape[-1]:
    raise ValueError(f'queries must be [N, {key_channels} + {basis.shape[-1]}], got {queries.shape}.')
  if keys.shape[:2] != basis.shape[:2] or attention.shape != (queries.shape[0],) + keys.shape[:2]:
    raise ValueError(f'inconsistent shapes: keys {keys.shape}, basis {basis.shape}, '
                     f'attention {attention.shape}, queries {queries.shape}.')
  what = np.einsum('nc,hwc->nhw', queries[:, :key_channels], keys)
  where = np.einsum('nc,hwc->nhw', queries[:, key_channels:], basis)
  difference = np.clip(what - where, -LOG10, LOG10)
  return WhatWhere(what, where, difference, difference * attention)


def red_white_blue(values: np.ndarray, limit: float) -> np.ndarray:
  """Maps values in [-limit, limit] to RGB uint8: -limit blue, 0 white, +limit red.

  Red = content ("what") dominates, blue = location ("where") dominates (A.5).
  """
  if limit <= 0:
    raise ValueError(f'limit must be > 0, got {limit}.')
  x = np.clip(np.asarray(values, np.float64) / limit, -1.0, 1.0)[..., None]
  white = np.array([1.0, 1.0, 1.0])
  red = np.array([0.85, 0.1, 0.1])
  blue = np.array([0.1, 0.2, 0.85])
  rgb = np.where(x >= 0, white + x * (red - white), white - x * (blue - white))
  return np.round(rgb * 255).astype(np.uint8)


# ----------------------------------------------------------------------------------------------
# Attention statistics (A.7)
# ----------------------------------------------------------------------------------------------


def marginals(attention: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Per-head sums of the weights along x and y (Figure 10).

  Args:
    attention: [..., N, h, w].
  Returns:
    (over_x [..., N, w], over_y [..., N, h]): the weight in each column / row.
  """
  attention = np.asarray(attention, np.float64)
  return attention.sum(axis=-2), attention.sum(axis=-1)


def entropy(attention: np.ndarray) -> np.ndarray:
  """Shannon entropy (nats) of each head's map, [..., N]; log(h*w) for a uniform map, 0 for a peak."""
  p = np.asarray(attention, np.float64)
  p = p.reshape(p.shape[:-2] + (-1,))
  with np.errstate(divide='ignore', invalid='ignore'):
    terms = np.where(p > 0, -p * np.log(np.where(p > 0, p, 1.0)), 0.0)
  return terms.sum(axis=-1)


def mass_in_box(attention: np.ndarray, box: Sequence[int], frame_shape: Sequence[int]) -> np.ndarray:
  """Attention mass per head that falls on a frame-pixel box (y, x, height, width).

  Each attention cell covers a rectangle of the frame; a cell counts with the
  fraction of its area that lies inside the box. Returns [..., N].
  """
  attention = np.asarray(attention, np.float64)
  h, w = attention.shape[-2:]
  height, width = frame_shape[:2]
  y0, x0, bh, bw = box

  def overlap(cells, length, start, size):
    edges = np.arange(cells + 1) * length / cells
    lo = np.clip(edges[:-1], start, start + size)
    hi = np.clip(edges[1:], start, start + size)
    return (hi - lo) / (edges[1:] - edges[:-1])

  weight = overlap(h, height, y0, bh)[:, None] * overlap(w, width, x0, bw)[None, :]
  return (attention * weight).sum(axis=(-2, -1))


# ----------------------------------------------------------------------------------------------
# Upsampling and blending for overlays
# ----------------------------------------------------------------------------------------------


def upsample(grid: np.ndarray, height: int, width: int) -> np.ndarray:
  """Bilinear resize of a [h, w] map (cell centres aligned) to [height, width]."""
  grid = np.asarray(grid, np.float64)
  h, w = grid.shape

  def coords(n_out, n_in):
    pos = (np.arange(n_out) + 0.5) * n_in / n_out - 0.5
    pos = np.clip(pos, 0, n_in - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, n_in - 1)
    return lo, hi, pos - lo

  y0, y1, fy = coords(height, h)
  x0, x1, fx = coords(width, w)
  top = grid[y0][:, x0] * (1 - fx) + grid[y0][:, x1] * fx
  bottom = grid[y1][:, x0] * (1 - fx) + grid[y1][:, x1] * fx
  return top * (1 - fy[:, None]) + bottom * fy[:, None]


def normalise(values: np.ndarray) -> np.ndarray:
  """Scales a non-negative map to [0, 1] by its maximum (all-zero maps stay zero)."""
  values = np.asarray(values, np.float64)
  peak = values.max() if values.size else 0.0
  return values / peak if peak > 0 else np.zeros_like(values)


def blend(frame: np.ndarray, heat: np.ndarray, floor: float = 0.25,
          colour: Sequence[int] | None = None) -> np.ndarray:
  """Overlays a [H, W] map in [0, 1] on an RGB frame: bright = high, dark = low.

  Without `colour`, the frame is dimmed to `floor` where heat = 0 and kept at full
  brightness where heat = 1 (the paper's attention figures). With `colour`, the
  colour is alpha-blended on top with alpha = heat (saliency overlays).
  """
  frame = np.asarray(frame, np.float64)
  heat = np.clip(np.asarray(heat, np.float64), 0.0, 1.0)[..., None]
  if frame.shape[:2] != heat.shape[:2]:
    raise ValueError(f'frame {frame.shape} and heat map {heat.shape[:2]} differ in size.')
  if colour is None:
    out = frame * (floor + (1.0 - floor) * heat)
  else:
    out = frame * (1.0 - heat) + np.asarray(colour, np.float64) * heat
  return np.clip(np.round(out), 0, 255).astype(np.uint8)


def attention_overlay(frame: np.ndarray, attention_map: np.ndarray, floor: float = 0.25) -> np.ndarray:
  """One head's [h, w] map upsampled to the frame, scaled by its peak and blended (bright = attended)."""
  heat = normalise(upsample(attention_map, frame.shape[0], frame.shape[1]))
  return blend(frame, heat, floor=floor)


# ----------------------------------------------------------------------------------------------
# Perturbation saliency (Greydanus et al. 2018; paper §4.7)
# ----------------------------------------------------------------------------------------------


def gaussian_kernel_1d(sigma: float) -> np.ndarray:
  radius = max(1, int(np.ceil(3 * sigma)))
  x = np.arange(-radius, radius + 1, dtype=np.float64)
  k = np.exp(-0.5 * (x / sigma)**2)
  return k / k.sum()


def gaussian_blur(frame: np.ndarray, sigma: float) -> np.ndarray:
  """Separable Gaussian blur of an [H, W, C] image (edge padding), float64."""
  image = np.asarray(frame, np.float64)
  kernel = gaussian_kernel_1d(sigma)
  radius = len(kernel) // 2
  padded = np.pad(image, ((radius, radius), (0, 0), (0, 0)), mode='edge')
  image = sum(kernel[k] * padded[k:k + image.shape[0]] for k in range(len(kernel)))
  padded = np.pad(image, ((0, 0), (radius, radius), (0, 0)), mode='edge')
  return sum(kernel[k] * padded[:, k:k + image.shape[1]] for k in range(len(kernel)))


def perturbation_mask(shape: Sequence[int], centre: Sequence[float], sigma: float) -> np.ndarray:
  """Gaussian bump [H, W] at `centre` (y, x), 1 at the centre, exactly 0 beyond 3 sigma."""
  yy, xx = np.mgrid[:shape[0], :shape[1]]
  d2 = (yy - centre[0])**2 + (xx - centre[1])**2
  mask = np.exp(-0.5 * d2 / sigma**2)
  return np.where(d2 <= (3 * sigma)**2, mask, 0.0)


def perturb(frame: np.ndarray, blurred: np.ndarray, mask: np.ndarray) -> np.ndarray:
  """X' = X (1 - M) + blur(X) M, rounded back to uint8 (Greydanus et al., eq. 1)."""
  mixed = np.asarray(frame, np.float64) * (1 - mask[..., None]) + blurred * mask[..., None]
  return np.clip(np.round(mixed), 0, 255).astype(np.uint8)


def saliency_grid(height: int, width: int, stride: int) -> tuple[np.ndarray, np.ndarray]:
  """Grid point centres (ys, xs) every `stride` pixels, starting half a stride in."""
  if stride < 1:
    raise ValueError(f'saliency stride must be >= 1, got {stride}.')
  return np.arange(stride // 2, height, stride), np.arange(stride // 2, width, stride)


def softmax(logits: np.ndarray) -> np.ndarray:
  logits = np.asarray(logits, np.float64)
  z = np.exp(logits - logits.max(axis=-1, keepdims=True))
  return z / z.sum(axis=-1, keepdims=True)


def saliency_scores(logits: np.ndarray, value: np.ndarray, base_logits: np.ndarray,
                    base_value: float) -> tuple[np.ndarray, np.ndarray]:
  """S_pi = 0.5 ||pi(X') - pi(X)||^2 (pi = softmaxed logits) and S_V = 0.5 (V(X') - V(X))^2.

  Args:
    logits: [P, A] for P perturbed frames; value: [P].
    base_logits: [A] and base_value: scalar for the unperturbed frame.
  Returns:
    (S_pi [P], S_V [P]).
  """
  s_pi = 0.5 * np.sum((softmax(logits) - softmax(base_logits)[None])**2, axis=-1)
  s_v = 0.5 * (np.asarray(value, np.float64) - float(base_value))**2
  return s_pi, s_v


def saliency_maps(evaluate: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], frame: np.ndarray,
                  stride: int = 5, mask_sigma: float = 5.0, blur_sigma: float = 3.0,
                  batch_size: int = 64, progress: Callable[[int, int], None] | None = None):
  """Perturbation saliency of `evaluate` around one frame.

  Args:
    evaluate: frames uint8 [P, H, W, C] -> (logits [P, A], value [P]); for a
      recurrent agent it must evaluate every frame from the same recurrent state.
    frame: uint8 [H, W, C], the (final) unperturbed frame.
    stride: pixels between perturbation centres.
    mask_sigma, blur_sigma: Gaussian widths of the perturbation region and the blur.
    batch_size: perturbed frames per `evaluate` call.
    progress: optional callback(done, total).
  Returns:
    (S_pi [gh, gw], S_V [gh, gw], ys, xs) on the grid of centres.
  """
  frame = np.asarray(frame)
  base_logits, base_value = evaluate(frame[None])
  blurred = gaussian_blur(frame, blur_sigma)
  ys, xs = saliency_grid(frame.shape[0], frame.shape[1], stride)
  centres = [(y, x) for y in ys for x in xs]
  s_pi, s_v = np.zeros(len(centres)), np.zeros(len(centres))
  for start in range(0, len(centres), batch_size):
    chunk = centres[start:start + batch_size]
    batch = np.stack([perturb(frame, blurred, perturbation_mask(frame.shape, c, mask_sigma)) for c in chunk])
    logits, value = evaluate(batch)
    s_pi[start:start + len(chunk)], s_v[start:start + len(chunk)] = saliency_scores(
        logits, value, base_logits[0], base_value[0])
    if progress is not None:
      progress(start + len(chunk), len(centres))
  return s_pi.reshape(len(ys), len(xs)), s_v.reshape(len(ys), len(xs)), ys, xs


def grid_to_frame(grid: np.ndarray, ys: np.ndarray, xs: np.ndarray, height: int, width: int) -> np.ndarray:
  """Spreads a saliency grid back to frame pixels (bilinear between centres)."""
  del ys, xs  # centres are evenly spaced, so a cell-centre-aligned resize matches them
  return upsample(grid, height, width)


# ----------------------------------------------------------------------------------------------
# Hard-attention evaluation summary (A.6, Table 5)
# ----------------------------------------------------------------------------------------------


def mean_and_stderr(scores: Sequence[float]) -> tuple[float, float]:
  """Mean and standard error of the mean (0 for fewer than two scores)."""
  scores = np.asarray(scores, np.float64)
  if scores.size == 0:
    raise ValueError('no scores to summarise.')
  stderr = scores.std(ddof=1) / np.sqrt(scores.size) if scores.size > 1 else 0.0
  return float(scores.mean()), float(stderr)


def ratio_with_error(mean: float, stderr: float, base_mean: float,
                     base_stderr: float) -> tuple[float, float]:
  """mean / base_mean with first-order propagated uncertainty; (nan, nan) if base_mean is 0."""
  if base_mean == 0:
    return float('nan'), float('nan')
  ratio = mean / base_mean
  rel = np.hypot(stderr / mean if mean else 0.0, base_stderr / base_mean)
  if mean == 0:
    return 0.0, abs(stderr / base_mean)
  return float(ratio), float(abs(ratio) * rel)
