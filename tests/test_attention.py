"""Spatial basis and spatial attention (paper 000, eq. 3-5 and 7), with hand-computed values."""

import numpy as np
import pytest

from s3ta.networks import hard_threshold, spatial_attention, spatial_basis

pytestmark = pytest.mark.core  # pure-JAX core only: also run on current JAX


def test_spatial_basis_shape_and_dtype_for_paper_size():
  basis = spatial_basis(27, 20)
  assert basis.shape == (27, 20, 64)
  assert basis.dtype == np.float32


def test_spatial_basis_values_are_outer_products_of_cos_and_sin():
  h, w, f = 27, 20, 4
  basis = spatial_basis(h, w, f)
  # Channel (a, b): a indexes the height vector (cos u=1..4, then sin u=1..4), b the width one.
  i, j = 3, 5
  assert basis[i, j, 0 * 8 + 0] == pytest.approx(np.cos(np.pi * i / h) * np.cos(np.pi * j / w), abs=1e-6)
  assert basis[i, j, 1 * 8 + 4] == pytest.approx(np.cos(2 * np.pi * i / h) * np.sin(np.pi * j / w), abs=1e-6)
  assert basis[i, j, 7 * 8 + 7] == pytest.approx(np.sin(4 * np.pi * i / h) * np.sin(4 * np.pi * j / w), abs=1e-6)
  # Top-left corner: every sin is 0 and every cos is 1.
  corner = basis[0, 0].reshape(8, 8)
  np.testing.assert_allclose(corner[:4, :4], 1.0)
  np.testing.assert_allclose(corner[4:, :], 0.0, atol=1e-7)


def test_spatial_basis_gives_distinct_positions_distinct_vectors():
  basis = spatial_basis(27, 20).reshape(-1, 64).astype(np.float64)
  distances = np.linalg.norm(basis[:, None] - basis[None], axis=-1)
  np.fill_diagonal(distances, np.inf)
  assert distances.min() > 1e-2


@pytest.mark.parametrize('height,width', [(27, 20), (14, 10)])  # paper size; 105 x 80 frames
def test_a_linear_read_out_of_the_basis_gives_each_locations_row_and_column(height, width):
  # No channel is constant along an axis (frequencies start at 1), yet the 64 channels span
  # both coordinates: what a sharp map reads from the basis says where, along each axis alone.
  basis = spatial_basis(height, width).reshape(height * width, -1).astype(np.float64)
  features = np.concatenate([basis, np.ones((height * width, 1))], axis=1)
  rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing='ij')
  for coordinate in (rows.ravel(), cols.ravel()):
    weights, *_ = np.linalg.lstsq(features, coordinate, rcond=None)
    assert np.abs(features @ weights - coordinate).max() < 0.1  # of a cell


@pytest.mark.parametrize('height,width,frequencies', [(0, 3, 4), (3, 3, 0)])
def test_spatial_basis_rejects_bad_sizes(height, width, frequencies):
  with pytest.raises(ValueError, match='must be|needs'):
    spatial_basis(height, width, frequencies)


def test_attention_on_hand_computed_example():
  # One head, a 1x2 map; logits 0 and ln 3 give weights 1/4 and 3/4.
  queries = np.array([[[1.0]]], np.float32)  # [B=1, N=1, C=1]
  keys = np.array([[[[0.0], [np.log(3.0)]]]], np.float32)  # [1, h=1, w=2, 1]
  values = np.array([[[[10.0, 1.0], [20.0, -1.0]]]], np.float32)  # [1, 1, 2, 2]
  answers, weights = spatial_attention(queries, keys, values)
  np.testing.assert_allclose(weights, [[[[0.25, 0.75]]]], rtol=1e-6)
  np.testing.assert_allclose(answers, [[[17.5, -0.5]]], rtol=1e-6)


def test_attention_weights_sum_to_one_per_head_and_shapes():
  rng = np.random.default_rng(0)
  queries = rng.normal(size=(2, 4, 72)).astype(np.float32)
  keys = rng.normal(size=(2, 27, 20, 72)).astype(np.float32)
  values = rng.normal(size=(2, 27, 20, 184)).astype(np.float32)
  answers, weights = spatial_attention(queries, keys, values)
  assert answers.shape == (2, 4, 184)
  assert weights.shape == (2, 4, 27, 20)
  np.testing.assert_allclose(np.asarray(weights).sum(axis=(-2, -1)), 1.0, rtol=1e-5)


def test_where_query_reads_out_the_matching_location_basis():
  """A 'where' query: zero content channels, a scaled basis vector in the spatial ones."""
  h, w = 27, 20
  basis = spatial_basis(h, w)
  content = np.random.default_rng(1).normal(size=(h, w, 8)).astype(np.float32)
  keys = np.concatenate([content, basis], axis=-1)[None]
  values = np.concatenate([np.zeros((h, w, 120), np.float32), basis], axis=-1)[None]
  target = (13, 9)
  query = np.concatenate([np.zeros(8, np.float32), 50.0 * basis[target]])[None, None]
  answers, weights = spatial_attention(query, keys, values)
  assert np.unravel_index(np.argmax(weights[0, 0]), (h, w)) == target
  assert float(weights[0, 0][target]) > 0.99
  np.testing.assert_allclose(answers[0, 0, 120:], basis[target], atol=2e-2)


def test_hard_threshold_zero_is_identity_and_one_keeps_the_argmax():
  rng = np.random.default_rng(2)
  logits = rng.normal(size=(1, 2, 5, 4)).astype(np.float32)
  weights = np.exp(logits) / np.exp(logits).sum(axis=(-2, -1), keepdims=True)
  np.testing.assert_array_equal(hard_threshold(weights, 0.0), weights)
  hard = np.asarray(hard_threshold(weights, 1.0))
  for head in range(2):
    expected = np.zeros((5, 4), np.float32)
    expected[np.unravel_index(np.argmax(weights[0, head]), (5, 4))] = 1.0
    np.testing.assert_array_equal(hard[0, head], expected)
  # t = 0.5 keeps exactly the locations >= half the peak, renormalised.
  half = np.asarray(hard_threshold(weights, 0.5))
  kept = weights >= 0.5 * weights.max(axis=(-2, -1), keepdims=True)
  np.testing.assert_allclose(half, np.where(kept, weights, 0) / np.where(kept, weights, 0).sum(axis=(-2, -1), keepdims=True), rtol=1e-6)
