"""impala_loss against V-trace values computed by hand (T = 2 and 3, with a terminal), jitted and not."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from s3ta.learning import impala_loss

pytestmark = pytest.mark.core  # pure-JAX core only: also run on current JAX

LOG = np.log


def terminal_case():
  """T=3, B=1, 2 actions, uniform policy = behaviour (rho = 1), gamma 0.9, the episode ends
  after step 1 (discount 0 there): logits, values, actions, rewards, discounts."""
  return (np.zeros((3, 1, 2), np.float32), np.array([[0.5], [1.0], [2.0], [3.0]], np.float32),
          np.array([[0], [1], [0]], np.int32), np.array([[1.0], [0.0], [2.0]], np.float32),
          np.array([[0.9], [0.0], [0.9]], np.float32))


class HandComputedLossTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_on_policy_loss_with_a_terminal_step(self):
    logits, values, actions, rewards, discounts = terminal_case()
    loss, m = self.variant(impala_loss)(logits, values, actions, logits, rewards, discounts)
    # On-policy, lambda 1: v_2 = 2 + 0.9*3 = 4.7, v_1 = 0 (terminal), v_0 = 1 + 0.9*0 = 1.
    # td errors v_s - V(x_s) = [0.5, -1, 2.7]; pg advantages r + g*v_{s+1} - V = [0.5, -1, 2.7].
    baseline = 0.5 * (0.5**2 + 1.0**2 + 2.7**2)  # 4.27
    pg = -(0.5 - 1.0 + 2.7) * LOG(0.5)  # 1.5249
    entropy = 3 * LOG(0.5)  # sum pi log pi = -2.0794
    assert float(m['baseline_loss']) == pytest.approx(baseline, rel=1e-6)
    assert float(m['pg_loss']) == pytest.approx(pg, rel=1e-6)
    assert float(loss) == pytest.approx(pg + 0.5 * baseline + 0.01 * entropy, rel=1e-6)
    assert float(loss) == pytest.approx(3.639130, rel=1e-6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_off_policy_loss_clips_importance_weights(self):
    # T=2: pi(a0)=0.8 vs mu=0.5 -> rho 1.6 clipped to 1; pi(a1)=0.2 vs 0.5 -> rho = c = 0.4.
    logits = np.array([[[LOG(0.8), LOG(0.2)]], [[LOG(0.2), LOG(0.8)]]], np.float32)
    behaviour = np.zeros((2, 1, 2), np.float32)
    values = np.array([[1.0], [2.0], [3.0]], np.float32)
    actions = np.zeros((2, 1), np.int32)
    rewards = np.ones((2, 1), np.float32)
    discounts = np.full((2, 1), 0.9, np.float32)
    loss, m = self.variant(impala_loss)(logits, values, actions, behaviour, rewards, discounts,
                                        baseline_cost=0.5, entropy_cost=0.01)
    # delta_0 = 1*(1 + 0.9*2 - 1) = 1.8; delta_1 = 0.4*(1 + 0.9*3 - 2) = 0.68
    # v_1 = 2 + 0.68 = 2.68; v_0 = 1 + 1.8 + 0.9*1*0.68 = 3.412
    # pg adv: a_0 = 1*(1 + 0.9*2.68 - 1) = 2.412; a_1 = 0.4*(1 + 0.9*3 - 2) = 0.68
    pg = -(2.412 * LOG(0.8) + 0.68 * LOG(0.2))
    baseline = 0.5 * ((3.412 - 1.0)**2 + (2.68 - 2.0)**2)
    entropy = 2 * (0.8 * LOG(0.8) + 0.2 * LOG(0.2))
    assert float(m['pg_loss']) == pytest.approx(pg, rel=1e-6)
    assert float(m['baseline_loss']) == pytest.approx(baseline, rel=1e-6)
    assert float(loss) == pytest.approx(pg + 0.5 * baseline + 0.01 * entropy, rel=1e-6)
    assert float(m['mean_rho']) == pytest.approx((1.6 + 0.4) / 2, rel=1e-6)


def test_targets_and_advantages_carry_no_gradient():
  rng = np.random.default_rng(0)
  t, b, a = 3, 2, 4
  logits = jnp.asarray(rng.normal(size=(t, b, a)), jnp.float32)
  values = jnp.asarray(rng.normal(size=(t + 1, b)), jnp.float32)
  actions = jnp.asarray(rng.integers(0, a, size=(t, b)), jnp.int32)
  rewards = jnp.asarray(rng.normal(size=(t, b)), jnp.float32)
  discounts = jnp.full((t, b), 0.99, jnp.float32)

  def loss_of_values(v):
    return impala_loss(logits, v, actions, logits, rewards, discounts)[0]

  grad = jax.grad(loss_of_values)(values)
  # The bootstrap value only appears inside (stopped) targets: zero gradient.
  np.testing.assert_allclose(grad[-1], 0.0, atol=1e-7)
  # For the others, d/dV 0.5 * 0.5 * (v_s - V)^2 = -0.5 * (v_s - V) = -0.5 * td_error.
  grad_unit = jax.grad(lambda v: impala_loss(logits, v, actions, logits, rewards, discounts,
                                             baseline_cost=1.0, entropy_cost=0.0)[0])(values)
  # Policy logits are independent of values here, so the gradient is the baseline term only.
  np.testing.assert_allclose(grad, 0.5 * grad_unit, rtol=1e-5)
  assert np.all(np.abs(np.asarray(grad[:-1])) > 0)


def test_mismatched_shapes_fail_at_trace_time():
  t, b, a = 3, 2, 4
  args = dict(logits=jnp.zeros((t, b, a)), values=jnp.zeros((t, b)),  # values must be [T + 1, B]
              actions=jnp.zeros((t, b), jnp.int32), behaviour_logits=jnp.zeros((t, b, a)),
              rewards=jnp.zeros((t, b)), discounts=jnp.ones((t, b)))
  with pytest.raises(AssertionError, match=r'\(4, 2\)'):
    jax.jit(impala_loss)(**args)


def test_a_centred_baseline_loses_the_mean_td_error_and_nothing_else():
  # `terminal_case`, computed by hand above: td errors [0.5, -1, 2.7], mean 2.2 / 3. Centred, the
  # baseline is half the sum of squares of [0.5, -1, 2.7] - 2.2 / 3; the mean error is
  # reported either way, and its gradient on the values sums to zero (no pull on the level).
  logits, values, actions, rewards, discounts = terminal_case()
  args = (logits, values, actions, logits, rewards, discounts)
  errors = np.array([0.5, -1.0, 2.7])
  _, plain = impala_loss(*args)
  _, centred = impala_loss(*args, centre_baseline=True)
  assert float(plain['mean_td_error']) == pytest.approx(2.2 / 3, rel=1e-5)
  assert float(centred['mean_td_error']) == pytest.approx(2.2 / 3, rel=1e-5)
  assert float(plain['baseline_loss']) == pytest.approx(0.5 * np.sum(errors**2), rel=1e-5)
  assert float(centred['baseline_loss']) == pytest.approx(
      0.5 * np.sum((errors - errors.mean())**2), rel=1e-5)
  grad = jax.grad(lambda v: impala_loss(logits, v, actions, logits, rewards, discounts,
                                        entropy_cost=0.0, centre_baseline=True)[0])(values)
  # Steps 0 and 2 bootstrap from V(x_1) and V(x_3) inside stopped targets: the gradient is
  # -0.5 * (centred error) on V(x_0..2) and 0 on the bootstrap value.
  np.testing.assert_allclose(grad[:, 0], np.append(-0.5 * (errors - errors.mean()), 0.0),
                             rtol=1e-5, atol=1e-6)
  assert float(jnp.sum(grad)) == pytest.approx(0.0, abs=1e-5)
