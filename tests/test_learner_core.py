"""The pure learner update: TF1 RMSProp (optax), gradient clipping, sgd_step behaviour."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from s3ta.learning import (HYPERPARAM_NAMES, LearnerConfig, Trajectory, get_hyperparams,
                           init_training_state, make_optimizer, make_sgd_step, resume_with_config,
                           set_hyperparams)
from s3ta.learning import ppo
from s3ta.learning.learner_core import describe_config_changes, update_value_offset
from s3ta.learning.optimizer import rmsprop
from s3ta.networks import make_network
from s3ta.utils import checkpoint

from tests.test_networks import SMALL

pytestmark = pytest.mark.core  # pure-JAX core only: also run on current JAX


@pytest.mark.parametrize('initial_scale', [1.0, 0.0])
def test_rmsprop_is_tf1s_two_steps_by_hand(initial_scale):
  """ms <- 0.99 ms + 0.01 g^2 from ms0 = initial_scale; update = -lr g / sqrt(ms + eps)."""
  params = {'w': jnp.array([1.0, -2.0])}
  g1, g2 = np.array([0.5, 0.1]), np.array([-0.2, 0.3])
  opt = rmsprop(learning_rate=0.1, epsilon=0.01, decay=0.99, initial_scale=initial_scale,
                clip_mode='none')
  state = opt.init(params)
  u1, state = opt.update({'w': jnp.asarray(g1)}, state, params)
  u2, _ = opt.update({'w': jnp.asarray(g2)}, state, params)
  ms1 = 0.99 * initial_scale + 0.01 * g1**2
  ms2 = 0.99 * ms1 + 0.01 * g2**2
  np.testing.assert_allclose(u1['w'], -0.1 * g1 / np.sqrt(ms1 + 0.01), rtol=1e-6)
  np.testing.assert_allclose(u2['w'], -0.1 * g2 / np.sqrt(ms2 + 0.01), rtol=1e-6)


def test_momentum_accumulates_the_normalised_steps():
  params = {'w': jnp.zeros(1)}
  opt = rmsprop(learning_rate=0.1, epsilon=0.0, decay=0.5, momentum=0.9, initial_scale=0.0,
                clip_mode='none')
  state = opt.init(params)
  u1, state = opt.update({'w': jnp.array([2.0])}, state, params)
  u2, _ = opt.update({'w': jnp.array([2.0])}, state, params)
  # ms1 = 2, step1 = 2 / sqrt(2); ms2 = 3, step2 = 2 / sqrt(3); mom2 = 0.9 mom1 + step2.
  np.testing.assert_allclose(u1['w'], [-0.1 * np.sqrt(2.0)], rtol=1e-6)
  np.testing.assert_allclose(u2['w'], [-0.1 * (0.9 * np.sqrt(2.0) + 2 / np.sqrt(3.0))], rtol=1e-6)


def test_gradients_are_clipped_before_rmsprop():
  params = {'a': jnp.zeros(2), 'b': jnp.zeros(1)}
  grads = {'a': jnp.array([3000.0, -5.0]), 'b': jnp.array([-2000.0])}
  # With decay 0 and eps 0 the update is -lr * sign(clipped g): compare the clipped values
  # through the mean square the chain keeps (ms = clipped g^2).
  for mode, threshold, expected in (('element', 1280.0, {'a': [1280.0, -5.0], 'b': [-1280.0]}),
                                    ('global_norm', 5.0, None)):
    opt = rmsprop(learning_rate=1.0, epsilon=0.0, decay=0.0, initial_scale=0.0,
                  grad_clip=threshold, clip_mode=mode)
    _, state = opt.update(grads, opt.init(params), params)
    ms = state[1].nu
    if expected is None:  # global norm: every gradient scaled by 5 / ||g||
      norm = np.sqrt(3000.0**2 + 5.0**2 + 2000.0**2)
      expected = {k: np.asarray(v) * 5.0 / norm for k, v in grads.items()}
    for k in grads:
      np.testing.assert_allclose(ms[k], np.square(expected[k]), rtol=1e-5)
  with pytest.raises(ValueError, match="Unknown grad_clip_mode 'percentile'"):
    rmsprop(learning_rate=1.0, epsilon=0.0, decay=0.0, clip_mode='percentile')


def test_optimizer_follows_the_learner_config():
  config = LearnerConfig(rmsprop_initial_scale=1.0, rmsprop_momentum=0.5)
  state = make_optimizer(config).init({'w': jnp.zeros(3)})
  leaves = jax.tree_util.tree_leaves(state.inner_state.inner_state)  # inside the finite guard
  np.testing.assert_array_equal(leaves[0], np.ones(3))  # the mean square starts at 1 (TF1)
  np.testing.assert_array_equal(leaves[1], np.zeros(3))  # the momentum trace at 0
  # The injected hyperparameters, float32, under the optimizer's names.
  assert {k: float(v) for k, v in state.hyperparams.items()} == pytest.approx(
      {'learning_rate': config.learning_rate, 'epsilon': config.rmsprop_epsilon,
       'grad_clip': config.grad_clip, 'learning_rate_scale': 1.0})
  assert all(v.dtype == jnp.float32 for v in state.hyperparams.values())


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
  config = LearnerConfig(learning_rate=1e-3, rmsprop_epsilon=1e-5, entropy_cost=0.0,
                         rmsprop_initial_scale=0.0)
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
  values = {'learning_rate': 0.0, 'entropy_cost': 0.5, 'rmsprop_epsilon': 0.1, 'grad_clip': 1.0}
  frozen = set_hyperparams(state, values)
  assert {k: float(v) for k, v in get_hyperparams(frozen).items()} == pytest.approx(values)
  assert tuple(get_hyperparams(frozen)) == HYPERPARAM_NAMES
  after, _ = sgd_step(frozen, batch)
  assert sgd_step._cache_size() == compiled
  # Learning rate 0: parameters do not move.
  for a, b in zip(jax.tree_util.tree_leaves(frozen.params), jax.tree_util.tree_leaves(after.params)):
    np.testing.assert_array_equal(a, b)
  assert float(get_hyperparams(after)['entropy_cost']) == 0.5  # carried through the step
  with pytest.raises(ValueError, match=r"Unknown hyperparameter name\(s\) \['momentum'\]"):
    set_hyperparams(state, {'momentum': 0.9})


def test_a_resume_applies_what_the_config_changed_and_keeps_the_rest(setup):
  """The optimizer state carries the hyperparameters: without this a changed flag is ignored."""
  network, config, _ = setup
  state = init_training_state(network, config, jax.random.PRNGKey(0))
  evolved = set_hyperparams(state, {'learning_rate': 1e-3, 'entropy_cost': 0.02})  # e.g. by PBT
  saved = {'learning_rate': 6e-4, 'entropy_cost': 0.01, 'rmsprop_epsilon': 1e-4, 'grad_clip': 40.0,
           'discount': 0.99}
  same, changes = resume_with_config(evolved, saved, dict(saved))
  assert changes == {} and same is evolved  # unchanged config: the evolved values stay
  current = dict(saved, learning_rate=3e-4, discount=0.9)  # discount is read from the config
  resumed, changes = resume_with_config(evolved, saved, current)
  assert changes == {'learning_rate': (6e-4, 3e-4)}
  values = {k: float(v) for k, v in get_hyperparams(resumed).items()}
  assert values == pytest.approx({'learning_rate': 3e-4, 'entropy_cost': 0.02,  # the state's
                                  'rmsprop_epsilon': config.rmsprop_epsilon,
                                  'grad_clip': config.grad_clip})
  assert describe_config_changes('learner', changes) == (
      'resumed with config.learner changed since the checkpoint, applied: learning_rate 0.0006 -> 0.0003')
  assert resume_with_config(evolved, None, current) == (evolved, {})  # no saved config: keep


def test_a_ppo_resume_applies_a_changed_adam_epsilon():
  config = ppo.PPOConfig()
  network = make_network(dict(SMALL, kind='s3ta'), 3, (6, 5, 3))
  state = ppo.init_training_state(network, config, jax.random.PRNGKey(0))
  saved = {'learning_rate': 2.5e-4, 'adam_epsilon': 1e-5, 'entropy_cost': 0.01}
  resumed, changes = resume_with_config(state, saved, dict(saved, adam_epsilon=1e-8, entropy_cost=0.0),
                                        ppo.OPTIMIZER_NAMES)
  assert changes == {'adam_epsilon': (1e-5, 1e-8), 'entropy_cost': (0.01, 0.0)}
  assert float(resumed.opt_state.hyperparams['epsilon']) == pytest.approx(1e-8)
  assert float(resumed.entropy_cost) == 0.0
  assert float(resumed.opt_state.hyperparams['learning_rate']) == pytest.approx(2.5e-4)


def test_rewards_are_clipped_before_vtrace(setup):
  network, config, sgd_step = setup
  state = init_training_state(network, config, jax.random.PRNGKey(0))
  batch = make_batch(network)
  huge = batch._replace(reward=np.sign(batch.reward) * 100.0)
  unit = batch._replace(reward=np.sign(batch.reward) * 1.0)
  _, m_huge = sgd_step(state, huge)
  _, m_unit = sgd_step(state, unit)
  assert float(m_huge['loss']) == pytest.approx(float(m_unit['loss']), rel=1e-5)


def test_learning_rate_anneals_linearly_to_zero_and_stays_there(setup):
  network, _, _ = setup

  def rates(config, steps):
    """The step size of each of `steps` optimizer updates (gradient 1, no clipping, no RMS)."""
    opt = make_optimizer(config)
    params = {'w': jnp.zeros(1)}
    state, out = opt.init(params), []
    for _ in range(steps):
      _, state = opt.update({'w': jnp.ones(1)}, state, params)
      out.append(float(state.hyperparams['learning_rate'] * state.hyperparams['learning_rate_scale']))
    return out

  base = dict(learning_rate=0.5, grad_clip_mode='none')
  np.testing.assert_allclose(rates(LearnerConfig(**base, learning_rate_decay_steps=4), 6),
                             [0.5, 0.375, 0.25, 0.125, 0.0, 0.0], atol=1e-7)
  np.testing.assert_allclose(rates(LearnerConfig(**base), 3), [0.5] * 3)
  late = LearnerConfig(**base, learning_rate_decay_steps=4, learning_rate_decay_begin=3)
  np.testing.assert_allclose(rates(late, 9), [0.5] * 4 + [0.375, 0.25, 0.125, 0.0, 0.0], atol=1e-7)
  decayed = LearnerConfig(learning_rate=0.5, learning_rate_decay_steps=4)
  # In the step: the rate of step k is reported, and after the anneal parameters freeze.
  sgd_step = make_sgd_step(network, decayed)
  state = init_training_state(network, decayed, jax.random.PRNGKey(0))
  batch = make_batch(network)
  reported = []
  for _ in range(5):
    before = state.params
    state, metrics = sgd_step(state, batch)
    reported.append(float(metrics['learning_rate']))
  np.testing.assert_allclose(reported, [0.5, 0.375, 0.25, 0.125, 0.0], atol=1e-7)
  for a, b in zip(jax.tree_util.tree_leaves(before), jax.tree_util.tree_leaves(state.params)):
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize('field,value,match', [
    ('grad_clip_mode', 'percentile', 'grad_clip_mode'),
    ('learning_rate_decay_steps', -1, 'learning_rate_decay_steps'),
    ('learning_rate_decay_begin', -5, 'learning_rate_decay_begin'),
    ('learning_rate', 0.0, 'learning_rate'),
    ('discount', 1.5, 'discount'),
    ('value_offset_step_size', -0.1, r'value_offset_step_size must be in \[0, 1\]'),
    ('value_offset_step_size', 1.5, 'value_offset_step_size'),
])
def test_bad_learner_config_is_rejected(field, value, match):
  with pytest.raises(ValueError, match=match):
    LearnerConfig.from_dict({field: value})


def test_a_nonfinite_batch_is_skipped_and_counted(setup):
  network, config, sgd_step = setup
  state = init_training_state(network, config, jax.random.PRNGKey(0))
  good = make_batch(network)
  bad = good._replace(reward=np.full_like(good.reward, np.nan))
  for k in (1, 2):
    after, metrics = sgd_step(state if k == 1 else after, bad)
    assert not np.isfinite(float(metrics['loss']))
    assert int(metrics['nonfinite_in_a_row']) == k and int(metrics['nonfinite_steps']) == k
  # Parameters and optimizer moments are untouched; the step counter still advances.
  for a, b in zip(jax.tree_util.tree_leaves((state.params, state.opt_state.inner_state.inner_state)),
                  jax.tree_util.tree_leaves((after.params, after.opt_state.inner_state.inner_state))):
    np.testing.assert_array_equal(a, b)
  assert int(after.steps) == 2
  after, metrics = sgd_step(after, good)  # a finite step resets the run of bad ones
  assert int(metrics['nonfinite_in_a_row']) == 0 and int(metrics['nonfinite_steps']) == 2
  assert any(np.any(a != b) for a, b in zip(jax.tree_util.tree_leaves(state.params),
                                            jax.tree_util.tree_leaves(after.params)))


def test_the_stop_rule_halts_at_k_nonfinite_steps_in_a_row():
  from s3ta.learning.progress import Counters, StopRule  # pylint: disable=g-import-not-at-top
  rule = StopRule(max_frames=100, max_nonfinite_in_a_row=3)
  counters = Counters(learner_frames=10)
  assert [rule.reason(counters, 1.0, k) for k in (0, 2, 3, 7)] == [None, None, 'non-finite',
                                                                   'non-finite']
  assert StopRule(max_frames=100).reason(counters, 1.0, 50) is None  # 0: no limit


def test_step_stats_average_the_lag_of_a_window_and_reset():
  from s3ta.learning.progress import StepStats  # pylint: disable=g-import-not-at-top
  stats = StepStats()
  assert stats.record() == dict(policy_lag=None, policy_lag_max=None, wait_s=0.0, sgd_s=0.0)
  stats.add_lag(2.0, 3)
  stats.add_lag(5.0, 9)
  stats.wait_s += 0.5
  assert stats.record() == dict(policy_lag=3.5, policy_lag_max=9, wait_s=0.5, sgd_s=0.0)
  stats.reset()
  assert stats.record()['policy_lag'] is None


def test_update_rms_clip_caps_each_normalised_step_after_rmsprop():
  # decay 0.99 from a zero mean square: ms = 0.01 g^2, so the normalised step is 10 sign(g)
  # (RMS 10 in every array, whatever the gradient's size); capped at RMS 2, times -lr.
  params = {'a': jnp.zeros(2), 'b': jnp.zeros(1)}
  grads = {'a': jnp.array([3.0, -4.0]), 'b': jnp.array([1e-3])}
  opt = rmsprop(learning_rate=0.5, epsilon=0.0, decay=0.99, initial_scale=0.0, grad_clip=2.0,
                clip_mode='update_rms')
  updates, _ = opt.update(grads, opt.init(params), params)
  np.testing.assert_allclose(updates['a'], [-1.0, 1.0], rtol=1e-5)
  np.testing.assert_allclose(updates['b'], [-1.0], rtol=1e-5)
  small, _ = rmsprop(learning_rate=0.5, epsilon=0.0, decay=0.99, initial_scale=0.0,
                     grad_clip=20.0, clip_mode='update_rms').update(grads, opt.init(params), params)
  np.testing.assert_allclose(small['a'], [-5.0, 5.0], rtol=1e-5)  # below the cap: unchanged



def test_the_value_offset_takes_the_mean_td_error_by_hand():
  # Step size 0.5: the share of the mean TD error is 0.5 / (1 - 0.5^n) at the n-th update,
  # i.e. 1, 2/3, 4/7, ... -> 0.5. A non-finite error leaves the offset where it was.
  offset = update_value_offset(jnp.float32(0), jnp.float32(-2.0), 0.5, jnp.int32(0))
  assert float(offset) == -2.0
  offset = update_value_offset(offset, jnp.float32(-3.0), 0.5, jnp.int32(1))
  assert float(offset) == pytest.approx(-4.0, rel=1e-6)
  assert float(update_value_offset(offset, jnp.float32(np.nan), 0.5, jnp.int32(2))) == \
      pytest.approx(-4.0, rel=1e-6)
  assert float(update_value_offset(jnp.float32(0), jnp.float32(1), 0.5, jnp.int32(60))) == \
      pytest.approx(0.5, rel=1e-6)


def test_the_value_offset_takes_the_level_of_the_returns_off_the_network(setup):
  # One-step episodes whose rewards average about -3 (std 1): the value targets are the
  # rewards (on-policy here, so V-trace keeps them). With the offset the values reach that
  # level within a few steps while the network's own outputs stay near where they started;
  # without it the network has to move its outputs there by gradient steps.
  network, _, _ = setup
  rng = np.random.default_rng(0)
  batch = make_batch(network)
  batch = batch._replace(discount=np.zeros_like(batch.discount),
                         reward=(-3 + rng.normal(size=batch.reward.shape)).astype(np.float32),
                         behaviour_logits=np.zeros_like(batch.behaviour_logits))
  level = float(np.mean(batch.reward[:-1]))
  errors, own = {}, {}
  for step_size in (0.0, 0.3):
    config = LearnerConfig(learning_rate=1e-3, rmsprop_epsilon=1e-5, rmsprop_initial_scale=0.0,
                           max_abs_reward=10.0, value_offset_step_size=step_size)
    sgd_step = make_sgd_step(network, config)
    state = init_training_state(network, config, jax.random.PRNGKey(0))
    for _ in range(15):
      state, metrics = sgd_step(state, batch)
    errors[step_size] = abs(float(metrics['mean_value']) - level)
    own[step_size] = float(metrics['mean_value']) - float(metrics.get('value_offset', 0.0))
  assert float(metrics['value_offset']) == pytest.approx(level, abs=0.3)
  assert errors[0.3] < 0.3 < 0.6 < errors[0.0], errors
  assert abs(own[0.3]) < 0.3 < 1.5 < abs(own[0.0]), own


def test_the_value_offset_is_off_by_default_and_survives_a_checkpoint(setup, tmp_path):
  network, _, _ = setup
  off = init_training_state(network, LearnerConfig(), jax.random.PRNGKey(0))
  assert off.value_offset is None  # no leaf: checkpoints of runs without it are unchanged
  assert len(jax.tree_util.tree_leaves(off)) == len(jax.tree_util.tree_leaves(off[:4]))
  config = LearnerConfig(value_offset_step_size=0.1)
  state = init_training_state(network, config, jax.random.PRNGKey(0))
  state, _ = make_sgd_step(network, config)(state, make_batch(network))
  assert float(state.value_offset) != 0
  path = checkpoint.save(str(tmp_path), 1, state)
  template = init_training_state(network, config, jax.random.PRNGKey(1))
  assert float(checkpoint.restore(path, template).state.value_offset) == float(state.value_offset)


def test_nan_is_named_wherever_it_sits_in_a_config():
  from s3ta.utils import dataclass_config  # pylint: disable=g-import-not-at-top
  dataclass_config.reject_nan({'a': 1.0, 'b': {'c': (1.0, 2.0)}, 'name': 'nan'}, 'config')  # all fine
  with pytest.raises(ValueError, match=r'^config\.b\.c\[1\] must be a number, got nan\.$'):
    dataclass_config.reject_nan({'a': 1.0, 'b': {'c': (1.0, float('nan'))}}, 'config')
  # Every comparison with NaN is false, so `learning_rate <= 0` alone let it through.
  with pytest.raises(ValueError, match=r'^learner\.learning_rate must be a number, got nan\.$'):
    LearnerConfig.from_dict({'learning_rate': float('nan')})
