"""The pure learner update: RMSProp (TF form), gradient clipping, sgd_step behaviour."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from s3ta.learning import (Hyperparams, LearnerConfig, Trajectory, clip_gradients,
                           init_training_state, make_sgd_step, rmsprop_init, rmsprop_update)
from s3ta.networks import make_network

from tests.test_networks import SMALL


def test_rmsprop_puts_epsilon_inside_the_square_root():
  params = {'w': jnp.array([1.0, -2.0])}
  grads = {'w': jnp.array([0.5, 0.1])}
  updates, state = rmsprop_update(grads, rmsprop_init(params), learning_rate=0.1, epsilon=0.01,
                                  decay=0.99)
  ms = 0.01 * np.array([0.25, 0.01])
  np.testing.assert_allclose(state.mean_square['w'], ms, rtol=1e-6)
  np.testing.assert_allclose(updates['w'], -0.1 * np.array([0.5, 0.1]) / np.sqrt(ms + 0.01), rtol=1e-6)


def test_gradient_clipping_element_wise_and_global_norm():
  grads = {'a': jnp.array([3000.0, -5.0]), 'b': jnp.array([-2000.0])}
  clipped = clip_gradients(grads, 1280.0, 'element')
  np.testing.assert_array_equal(clipped['a'], [1280.0, -5.0])
  np.testing.assert_array_equal(clipped['b'], [-1280.0])
  by_norm = clip_gradients({'a': jnp.array([3.0, 4.0])}, 1.0, 'global_norm')
  np.testing.assert_allclose(by_norm['a'], [0.6, 0.8], rtol=1e-6)


def make_batch(network, time=5, batch=4, seed=0):
  rng = np.random.default_rng(seed)
  shape = (time + 1, batch)
  return Trajectory(
      observation=rng.integers(0, 256, shape + network.observation_shape).astype(np.uint8),
      prev_action=rng.integers(0, network.num_actions, shape).astype(np.int32),
      prev_reward=rng.normal(size=shape).astype(np.float32),
      is_first=np.zeros(shape, bool),
      action=rng.integers(0, network.num_actions, shape).astype(np.int32),
      behaviour_logits=rng.normal(size=shape + (network.num_actions,)).astype(np.float32),
      reward=rng.normal(size=shape).astype(np.float32) * 3,
      discount=np.ones(shape, np.float32),
      initial_state=network.initial_state(batch))


@pytest.fixture(scope='module')
def setup():
  network = make_network(dict(SMALL, kind='s3ta'), 3, (6, 5, 3))
  config = LearnerConfig(learning_rate=1e-3)
  return network, config, make_sgd_step(network, config)


def test_sgd_step_lowers_the_loss_on_a_fixed_batch(setup):
  network, config, _ = setup
  # One-step episodes (discount 0) and no entropy term: the value targets are the fixed
  # rewards, so the baseline is a plain regression and the total loss must come down.
  config = LearnerConfig(learning_rate=1e-3, rmsprop_epsilon=1e-5, entropy_cost=0.0)
  sgd_step = make_sgd_step(network, config)
  state = init_training_state(network, config, jax.random.PRNGKey(0))
  batch = make_batch(network)
  batch = batch._replace(discount=np.zeros_like(batch.discount))
  losses, baselines = [], []
  for _ in range(40):
    state, metrics = sgd_step(state, batch)
    losses.append(float(metrics['loss']))
    baselines.append(float(metrics['baseline_loss']))
  assert int(state.steps) == 40
  assert losses[-1] < losses[0] - 2.0, losses
  assert baselines[-1] < 0.7 * baselines[0], baselines


def test_hyperparameters_change_without_recompiling(setup):
  network, config, sgd_step = setup
  state = init_training_state(network, config, jax.random.PRNGKey(0))
  batch = make_batch(network)
  state, _ = sgd_step(state, batch)
  compiled = sgd_step._cache_size()
  frozen = state._replace(hyperparams=Hyperparams(jnp.float32(0.0), jnp.float32(0.5),
                                                  jnp.float32(0.1), jnp.float32(1.0)))
  after, _ = sgd_step(frozen, batch)
  assert sgd_step._cache_size() == compiled
  # Learning rate 0: parameters do not move.
  for a, b in zip(jax.tree_util.tree_leaves(frozen.params), jax.tree_util.tree_leaves(after.params)):
    np.testing.assert_array_equal(a, b)


def test_rewards_are_clipped_before_vtrace(setup):
  network, config, sgd_step = setup
  state = init_training_state(network, config, jax.random.PRNGKey(0))
  batch = make_batch(network)
  huge = batch._replace(reward=np.sign(batch.reward) * 100.0)
  unit = batch._replace(reward=np.sign(batch.reward) * 1.0)
  _, m_huge = sgd_step(state, huge)
  _, m_unit = sgd_step(state, unit)
  assert float(m_huge['loss']) == pytest.approx(float(m_unit['loss']), rel=1e-5)


@pytest.mark.parametrize('field,value,match', [
    ('grad_clip_mode', 'percentile', 'grad_clip_mode'),
    ('learning_rate', 0.0, 'learning_rate'),
    ('discount', 1.5, 'discount'),
])
def test_bad_learner_config_is_rejected(field, value, match):
  with pytest.raises(ValueError, match=match):
    LearnerConfig.from_dict({field: value})
