"""Paper 004's AttentionAgent: Table 1 shapes, Table 2's parameter count, the importance
vector and top-K selection against a NumPy computation, patch centres, bad sizes named."""

import jax
import numpy as np
import pytest

from s3ta.networks import parameter_count
from s3ta.networks.attention_agent import (AttentionAgent, AttentionAgentConfig, extract_patches,
                                           init, patch_centres)

pytestmark = pytest.mark.core  # pure-JAX core only: also run on current JAX


def test_paper_sizes_and_parameter_count():
  config = AttentionAgentConfig()
  assert (config.patches_per_side, config.num_patches) == (23, 529)
  params = init(config, jax.random.PRNGKey(0))
  assert parameter_count(params['query']) == parameter_count(params['key']) == 592
  assert parameter_count(params['lstm']) + parameter_count(params['action']) == 2483
  assert parameter_count(params) == 3667  # 004 Table 2
  images = np.random.default_rng(0).integers(0, 256, (2, 96, 96, 3)).astype(np.uint8)
  patches = extract_patches(images, config)
  assert patches.shape == (2, 529, 147)
  # Patch 23 * 2 + 5 is the window at rows 8..14, columns 20..26, flattened as 7 x 7 x 3.
  np.testing.assert_allclose(patches[1, 23 * 2 + 5], images[1, 8:15, 20:27].reshape(-1) / 255.0,
                             rtol=1e-6)


def test_importance_is_the_column_sum_of_the_softmax_votes_and_top_k_its_largest():
  config = AttentionAgentConfig(image_size=12, patch_size=4, stride=4, top_k=3, num_actions=2)
  agent = AttentionAgent(config)
  params = init(config, jax.random.PRNGKey(1))
  images = np.random.default_rng(2).integers(0, 256, (1, 12, 12, 3)).astype(np.uint8)
  _, step = agent.apply({'params': params}, agent.initial_carry(1), images)
  x = np.asarray(extract_patches(images, config))[0]  # [9, 48]
  q = x @ np.asarray(params['query']['kernel']) + np.asarray(params['query']['bias'])
  k = x @ np.asarray(params['key']['kernel']) + np.asarray(params['key']['bias'])
  logits = q @ k.T / 2.0  # sqrt(d = 4)
  votes = np.exp(logits - logits.max(1, keepdims=True))
  votes /= votes.sum(1, keepdims=True)
  importance = votes.sum(0)
  np.testing.assert_allclose(step.importance[0], importance, rtol=1e-5)
  assert abs(float(step.importance.sum()) - 9.0) < 1e-4  # 9 patches hand out one vote each
  assert step.top_patches[0].tolist() == np.argsort(-importance)[:3].tolist()
  assert step.action.shape == (1, 2)


def test_patch_centres_are_normalised_positions():
  config = AttentionAgentConfig()
  centres = np.asarray(patch_centres(np.asarray([0, 22, 528]), config))
  np.testing.assert_allclose(centres, [[3.5 / 96, 3.5 / 96], [3.5 / 96, 91.5 / 96],
                                       [91.5 / 96, 91.5 / 96]])


@pytest.mark.parametrize('field, value, match', [
    ('top_k', 600, r'top_k \(600\) must be <= the number of patches \(529\)'),
    ('patch_size', 100, r'patch_size \(100\) must be <= image_size \(96\)'),
    ('lstm_size', 0, 'lstm_size must be an integer >= 1, got 0'),
])
def test_bad_sizes_are_named(field, value, match):
  with pytest.raises(ValueError, match=match):
    AttentionAgentConfig(**{field: value})
