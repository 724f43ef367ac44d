"""PPO's loss and GAE against hand-computed values; the update's minibatching and determinism."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from s3ta.learning import ppo
from s3ta.networks import make_network

from tests.test_learner_core import make_batch
from tests.test_networks import SMALL

pytestmark = pytest.mark.core  # pure-JAX core only: also run on current JAX

LOG = np.log


class HandComputedPPOTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_clipped_losses(self):
    # T=2, one env, 2 actions, clip 0.1. Ratios: 0.6 / 0.5 = 1.2 and 0.5 / 0.2 = 2.5.
    logits = np.array([[[LOG(0.6), LOG(0.4)]], [[LOG(0.5), LOG(0.5)]]], np.float32)
    behaviour = np.array([[[0.0, 0.0]], [[LOG(0.8), LOG(0.2)]]], np.float32)
    actions = np.array([[0], [1]], np.int32)
    advantages = np.array([[1.0], [-2.0]], np.float32)
    values, returns = np.array([[0.5], [1.0]], np.float32), np.array([[1.0], [0.0]], np.float32)
    old_values = np.array([[0.3], [1.2]], np.float32)
    config = ppo.PPOConfig(clip_epsilon=0.1, normalize_advantages=False)
    loss, m = self.variant(lambda *a: ppo.ppo_loss(*a, config=config, entropy_cost=0.01))(
        logits, values, actions, behaviour, advantages, returns, old_values)
    # min(1.2 * 1, 1.1 * 1) = 1.1; min(2.5 * -2, 1.1 * -2) = -5  ->  -mean = 1.95
    assert float(m['pg_loss']) == pytest.approx(1.95, rel=1e-6)
    # Values clipped to old +- 0.1 = [0.4, 1.1]: max((.5-1)^2, (.4-1)^2) = .36, max(1, 1.21) = 1.21
    assert float(m['baseline_loss']) == pytest.approx(0.5 * (0.36 + 1.21) / 2, rel=1e-6)
    entropy = (-(0.6 * LOG(0.6) + 0.4 * LOG(0.4)) + LOG(2.0)) / 2
    assert float(m['entropy']) == pytest.approx(entropy, rel=1e-6)
    assert float(loss) == pytest.approx(1.95 + 0.5 * 0.3925 - 0.01 * entropy, rel=1e-6)
    assert float(m['clip_fraction']) == 1.0  # both ratios are outside [0.9, 1.1]

  @chex.variants(with_jit=True, without_jit=True)
  def test_gae(self):
    # delta = r + d v' - v = [1.8, -2, 1.6]; lambda 0.5: adv = [1.8 + 0.9 * 0.5 * -2, -2, 1.6].
    rewards = np.array([[1.0], [0.0], [1.0]], np.float32)
    discounts = np.array([[0.9], [0.0], [0.9]], np.float32)
    values = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)
    advantages, returns = self.variant(lambda r, d, v: ppo.gae(r, d, v, 0.5))(
        rewards, discounts, values)
    np.testing.assert_allclose(advantages[:, 0], [0.9, -2.0, 1.6], rtol=1e-6)
    np.testing.assert_allclose(returns[:, 0], [1.9, 0.0, 4.6], rtol=1e-6)


def test_advantages_are_normalised_per_minibatch():
  config = ppo.PPOConfig(clip_epsilon=10.0, clip_value=False)  # no clipping: ratio 1 on-policy
  logits = np.zeros((2, 2, 3), np.float32)
  advantages = np.array([[1.0, 3.0], [5.0, 7.0]], np.float32)
  zeros = np.zeros((2, 2), np.float32)
  actions = np.zeros((2, 2), np.int32)
  loss = lambda l: ppo.ppo_loss(l, zeros, actions, logits, advantages, zeros, zeros, config=config,
                                entropy_cost=0.0)
  _, m = loss(logits)
  assert abs(float(m['pg_loss'])) < 1e-6  # normalised advantages have mean 0
  # ...and unit spread: d(-mean(ratio * A))/d logits = -A / 4 * (onehot(0) - 1/3) at ratio 1,
  # with A = (advantages - 4) / sqrt(5), the minibatch's own mean and (population) std.
  normalised = (advantages - 4.0) / np.sqrt(5.0)
  expected = -normalised[..., None] / 4 * (np.array([1.0, 0.0, 0.0]) - 1 / 3)
  np.testing.assert_allclose(jax.grad(lambda l: loss(l)[0])(logits), expected, rtol=1e-5, atol=1e-7)


def _feed_forward_network():
  return make_network(dict(SMALL, kind='nature', nature_channels=(4, 8, 8), nature_kernels=(2, 2, 1),
                           nature_strides=(1, 1, 1), nature_hidden=16), 3, (6, 5, 3))


def test_update_takes_epochs_times_minibatches_steps_deterministically():
  network = _feed_forward_network()
  config = ppo.PPOConfig(learning_rate=1e-3, epochs=2, num_minibatches=2)
  update = ppo.make_ppo_update(network, config)
  state = ppo.init_training_state(network, config, jax.random.PRNGKey(0))
  rollout = make_batch(network, time=5, batch=4)
  after, metrics = update(state, rollout)
  again, _ = update(state, rollout)
  assert int(after.steps) == 1 and int(after.opt_state.count) == 4  # 2 epochs x 2 minibatches
  jax.tree_util.tree_map(np.testing.assert_array_equal, after.params, again.params)
  assert any(np.any(a != b) for a, b in zip(jax.tree_util.tree_leaves(state.params),
                                            jax.tree_util.tree_leaves(after.params)))
  assert float(metrics['learning_rate']) == pytest.approx(1e-3)
  assert np.isfinite(float(metrics['loss'])) and 0.0 <= float(metrics['clip_fraction']) <= 1.0
  # Annealed over 2 updates (8 optimizer steps): the last step of the first update uses 1 - 3/8.
  decayed = ppo.PPOConfig(learning_rate=1e-3, epochs=2, num_minibatches=2,
                          learning_rate_decay_updates=2)
  state2 = ppo.init_training_state(network, decayed, jax.random.PRNGKey(0))
  update2 = ppo.make_ppo_update(network, decayed)
  state2, m1 = update2(state2, rollout)
  state2, m2 = update2(state2, rollout)
  assert float(m1['learning_rate']) == pytest.approx(1e-3 * 5 / 8)
  assert float(m2['learning_rate']) == pytest.approx(1e-3 / 8)
  with pytest.raises(ValueError, match=r'ppo.num_minibatches \(3\) must divide .* \(4\)'):
    ppo.make_ppo_update(network, ppo.PPOConfig(num_minibatches=3))(state, rollout)


def test_sample_minibatches_of_the_whole_rollout_equal_environment_minibatches():
  # One minibatch of everything: the loss is the same mean over the same T x B steps, whichever
  # axis is shuffled, so one update lands on the same parameters.
  network = _feed_forward_network()
  rollout = make_batch(network, time=5, batch=4)
  after = {}
  for axis in ppo.MINIBATCH_AXES:
    config = ppo.PPOConfig(learning_rate=1e-3, epochs=1, num_minibatches=1, minibatch_axis=axis)
    state = ppo.init_training_state(network, config, jax.random.PRNGKey(0))
    after[axis], _ = ppo.make_ppo_update(network, config)(state, rollout)
  jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7),
                         after['envs'].params, after['samples'].params)


def test_sample_minibatches_split_steps_not_environments():
  network = _feed_forward_network()
  rollout = make_batch(network, time=5, batch=4)  # 5 steps (plus the bootstrap) x 4 envs = 20
  config = ppo.PPOConfig(epochs=2, num_minibatches=5, minibatch_axis='samples')  # 5 of 4 steps
  state = ppo.init_training_state(network, config, jax.random.PRNGKey(0))
  after, _ = ppo.make_ppo_update(network, config)(state, rollout)
  assert int(after.opt_state.count) == 10  # 2 epochs x 5 minibatches: 4 envs would allow 1, 2, 4
  with pytest.raises(ValueError, match=r'ppo.num_minibatches \(3\) must divide the steps .* \(20\)'):
    ppo.make_ppo_update(network, ppo.PPOConfig(num_minibatches=3, minibatch_axis='samples'))(
        state, rollout)


def test_sample_minibatches_refuse_a_recurrent_agent():
  recurrent = make_network(dict(SMALL, kind='resnet_lstm'), 3, (6, 5, 3))
  with pytest.raises(ValueError, match="minibatch_axis='samples' needs an agent without recurrent"):
    ppo.make_ppo_update(recurrent, ppo.PPOConfig(minibatch_axis='samples'))


@pytest.mark.parametrize('field, value, message', [
    ('epochs', 0, 'ppo.epochs must be an integer >= 1'),
    ('gae_lambda', 1.5, r'ppo.gae_lambda must be in \[0, 1\]'),
    ('clip_epsilon', 0.0, 'ppo.clip_epsilon must be > 0'),
    ('minibatch_axis', 'time', r"ppo.minibatch_axis must be one of \('envs', 'samples'\), got 'time'"),
])
def test_bad_ppo_config_is_rejected(field, value, message):
  with pytest.raises(ValueError, match=message):
    ppo.PPOConfig(**{field: value})
