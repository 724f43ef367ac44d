"""Known-answer tests of the pure analysis numerics (s3ta/analysis/numerics.py)."""

import numpy as np
import pytest

from s3ta.analysis import numerics

LOG10 = np.log(10.0)


def test_what_where_hand_built_query():
  # One head, a 1x2 map, 2 key channels and 2 basis channels.
  keys = np.array([[[1.0, 0.0], [0.0, 2.0]]])  # [h=1, w=2, C_k=2]
  basis = np.array([[[1.0, 1.0], [0.0, -1.0]]])  # [1, 2, C_s=2]
  queries = np.array([[3.0, 1.0, 0.5, 2.0]])  # [N=1, 4]
  attention = np.array([[[0.25, 0.75]]])
  ww = numerics.what_where(queries, keys, basis, attention)
  np.testing.assert_allclose(ww.what, [[[3.0, 2.0]]])  # 3*1 + 1*0, 3*0 + 1*2
  np.testing.assert_allclose(ww.where, [[[2.5, -2.0]]])  # 0.5 + 2, 0 - 2
  np.testing.assert_allclose(ww.difference, [[[0.5, LOG10]]])  # 4.0 is truncated at log 10
  np.testing.assert_allclose(ww.contribution, [[[0.125, 0.75 * LOG10]]])


def test_what_where_truncates_both_sides_and_sums_to_logits():
  rng = np.random.default_rng(0)
  keys, basis = rng.normal(size=(3, 4, 2)), rng.normal(size=(3, 4, 5))
  queries = rng.normal(size=(2, 7)) * 5
  attention = np.full((2, 3, 4), 1 / 12)
  ww = numerics.what_where(queries, keys, basis, attention)
  logits = np.einsum('nc,hwc->nhw', queries, np.concatenate([keys, basis], -1))
  np.testing.assert_allclose(ww.what + ww.where, logits, atol=1e-12)
  assert ww.difference.min() == pytest.approx(-LOG10) and ww.difference.max() == pytest.approx(LOG10)
  with pytest.raises(ValueError):
    numerics.what_where(queries[:, :6], keys, basis, attention)


def test_red_white_blue_endpoints():
  rgb = numerics.red_white_blue(np.array([-LOG10, 0.0, LOG10, 99.0]), LOG10)
  assert tuple(rgb[1]) == (255, 255, 255)  # balanced: white
  assert rgb[0, 2] > rgb[0, 0]  # where dominates: blue
  assert rgb[2, 0] > rgb[2, 2]  # what dominates: red
  np.testing.assert_array_equal(rgb[2], rgb[3])  # clipped


def test_marginals_and_entropy():
  attention = np.zeros((2, 3, 4))
  attention[0, 1, 2] = 1.0  # a single peak
  attention[1] = 1 / 12  # uniform
  over_x, over_y = numerics.marginals(attention)
  np.testing.assert_allclose(over_x[0], [0, 0, 1, 0])
  np.testing.assert_allclose(over_y[0], [0, 1, 0])
  np.testing.assert_allclose(over_x[1], [0.25] * 4)
  np.testing.assert_allclose(over_y[1], [1 / 3] * 3)
  np.testing.assert_allclose(numerics.entropy(attention), [0.0, np.log(12)])


def test_mass_in_box():
  attention = np.zeros((1, 2, 2))
  attention[0, 0, 0], attention[0, 1, 1] = 0.4, 0.6
  # Frame 20x20: each cell covers 10x10 pixels. The box covers the top-left cell fully
  # and a quarter of the bottom-right cell.
  mass = numerics.mass_in_box(attention, (0, 0, 15, 15), (20, 20))
  np.testing.assert_allclose(mass, [0.4 + 0.6 * 0.25])


def test_upsample_blend_and_overlay():
  grid = np.array([[0.0, 1.0], [2.0, 3.0]])
  up = numerics.upsample(grid, 4, 4)
  assert up.shape == (4, 4)
  np.testing.assert_allclose(up[0, 0], 0.0)  # corners keep the corner cell values
  np.testing.assert_allclose(up[-1, -1], 3.0)
  np.testing.assert_allclose(numerics.upsample(np.full((3, 5), 0.7), 30, 20), 0.7)
  frame = np.full((4, 4, 3), 200, np.uint8)
  heat = np.zeros((4, 4))
  heat[0, 0] = 1.0
  out = numerics.blend(frame, heat, floor=0.25)
  assert tuple(out[0, 0]) == (200, 200, 200) and tuple(out[1, 1]) == (50, 50, 50)
  green = numerics.blend(frame, heat, colour=(0, 255, 0))
  assert tuple(green[0, 0]) == (0, 255, 0) and tuple(green[1, 1]) == (200, 200, 200)
  overlay = numerics.attention_overlay(np.full((27, 20, 3), 100, np.uint8), np.eye(27, 20))
  assert overlay.shape == (27, 20, 3) and overlay.dtype == np.uint8


def test_saliency_scores_known_values():
  base_logits = np.log(np.array([0.5, 0.5]))
  logits = np.log(np.array([[0.5, 0.5], [1.0, 1e-300]]))
  s_pi, s_v = numerics.saliency_scores(logits, np.array([1.0, 3.0]), base_logits, 1.0)
  np.testing.assert_allclose(s_pi, [0.0, 0.5 * (0.25 + 0.25)])
  np.testing.assert_allclose(s_v, [0.0, 2.0])


def test_perturbation_mask_is_local_and_blur_keeps_flat_images():
  mask = numerics.perturbation_mask((40, 40), (20, 20), sigma=3.0)
  assert mask[20, 20] == 1.0 and mask[20, 30] == 0.0 and mask[20, 29] > 0.0
  flat = np.full((10, 12, 3), 77.0)
  np.testing.assert_allclose(numerics.gaussian_blur(flat, 2.0), flat)


def test_saliency_is_zero_where_the_network_is_blind():
  """A 'network' that only reads columns < 60: blurring further right changes nothing."""
  rng = np.random.default_rng(0)
  frame = rng.integers(0, 256, size=(50, 100, 3), dtype=np.uint8)
  weights = rng.normal(size=(3, 60, 3))

  def evaluate(frames):  # frame by frame, so the arithmetic cannot depend on the batch size
    seen = frames[:, :, :60].astype(np.float64) / 255.0  # [P, 50, 60, 3]
    logits = np.stack([np.einsum('hwc,awc->a', s, weights) / 50 for s in seen])
    return logits, np.array([s.mean() * 10 for s in seen])

  sigma, stride = 3.0, 10
  s_pi, s_v, ys, xs = numerics.saliency_maps(evaluate, frame, stride=stride, mask_sigma=sigma,
                                             blur_sigma=2.0, batch_size=7)
  assert s_pi.shape == s_v.shape == (len(ys), len(xs)) == (5, 10)
  blind = xs - 3 * sigma >= 60  # the perturbation's support lies entirely in the ignored region
  assert blind.any() and (~blind).any()
  np.testing.assert_array_equal(s_pi[:, blind], 0.0)
  np.testing.assert_array_equal(s_v[:, blind], 0.0)
  assert np.all(s_pi[:, xs < 50] > 0) and np.all(s_v[:, xs < 50] > 0)


def test_mean_stderr_and_ratio():
  mean, stderr = numerics.mean_and_stderr([1.0, 2.0, 3.0])
  assert mean == 2.0 and stderr == pytest.approx(1.0 / np.sqrt(3))
  assert numerics.mean_and_stderr([5.0]) == (5.0, 0.0)
  ratio, err = numerics.ratio_with_error(2.0, 0.2, 4.0, 0.4)
  assert ratio == 0.5 and err == pytest.approx(0.5 * np.hypot(0.1, 0.1))
  assert np.isnan(numerics.ratio_with_error(1.0, 0.1, 0.0, 0.1)[0])
