"""The IMPALA loss: V-trace policy gradient, baseline and entropy terms, built from rlax.

Time-major, summed over time and batch, as in Espeholt et al. (2018).
"""

import functools

import chex
import jax
import jax.numpy as jnp
from s3ta.utils import rlax_import  # rlax, or its V-trace stand-in where rlax does not import


def impala_loss(logits: jax.Array, values: jax.Array, actions: jax.Array,
                behaviour_logits: jax.Array, rewards: jax.Array, discounts: jax.Array, *,
                baseline_cost: float = 0.5, entropy_cost: float = 0.01, clip_rho: float = 1.0,
                clip_pg_rho: float = 1.0, lambda_: float = 1.0,
                centre_baseline: bool = False) -> tuple[jax.Array, dict]:
  """V-trace actor-critic loss for one batch of unrolls.

  Args:
    logits: [T, B, A] learner policy logits at steps 0..T-1.
    values: [T + 1, B] learner values; values[T] bootstraps.
    actions: [T, B] actions the behaviour policy took.
    behaviour_logits: [T, B, A] the behaviour policy's logits.
    rewards: [T, B] rewards, already clipped.
    discounts: [T, B] `gamma * (1 - terminal_t)`.
    baseline_cost, entropy_cost: weights of the baseline and entropy terms (may be traced).
    clip_rho, clip_pg_rho: V-trace truncation of the importance weights.
    lambda_: V-trace lambda.
    centre_baseline: take the batch's mean TD error out of the baseline loss, so the values
      learn only how the targets differ from their mean (the learner's value offset takes
      the mean: `learner_core.update_value_offset`).
  Returns:
    (loss, metrics) with loss = pg + baseline_cost * baseline + entropy_cost * entropy,
    pg = -sum(pg_advantage * log pi(a)), baseline = 0.5 * sum((v_s - V(x_s))^2) (with the
    mean of v_s - V(x_s) subtracted if `centre_baseline`) and entropy = sum(pi * log pi)
    (the negative entropy). Targets and advantages carry no gradient. metrics hold the
    loss terms, the mean entropy, rho, value and TD error v_s - V(x_s).
  """
  time, batch = actions.shape
  chex.assert_shape([logits, behaviour_logits], (time, batch, None))
  chex.assert_shape(values, (time + 1, batch))
  chex.assert_shape([rewards, discounts], (time, batch))
  chex.assert_type([logits, values, behaviour_logits, rewards, discounts], float)
  chex.assert_type(actions, int)
  rlax = rlax_import.rlax
  per_unroll = functools.partial(jax.vmap, in_axes=1)  # rlax works on one [T] sequence

  rhos = jax.lax.stop_gradient(
      rlax.categorical_importance_sampling_ratios(logits, behaviour_logits, actions))
  vtrace = per_unroll(functools.partial(
      rlax.vtrace_td_error_and_advantage, lambda_=lambda_, clip_rho_threshold=clip_rho,
      clip_pg_rho_threshold=clip_pg_rho, stop_target_gradients=True), out_axes=1)
  out = vtrace(values[:-1], values[1:], rewards, discounts, rhos)
  td_errors = out.errors  # v_s - V(x_s), target side already stop-gradient
  mean_td_error = jax.lax.stop_gradient(jnp.mean(td_errors))
  if centre_baseline:
    td_errors = td_errors - mean_td_error

  # rlax averages over time; IMPALA sums over time and batch, hence `time *` and the sums.
  ones = jnp.ones_like(rewards)
  pg_loss = time * jnp.sum(per_unroll(rlax.policy_gradient_loss)(
      logits, actions, out.pg_advantage, ones))  # advantages stop-gradient inside
  baseline_loss = 0.5 * jnp.sum(jnp.square(td_errors))
  entropy_loss = time * jnp.sum(per_unroll(rlax.entropy_loss)(logits, ones))  # sum pi log pi
  loss = pg_loss + baseline_cost * baseline_loss + entropy_cost * entropy_loss
  metrics = {
      'loss': loss,
      'pg_loss': pg_loss,
      'baseline_loss': baseline_loss,
      'entropy': -entropy_loss / (time * batch),  # mean per-step entropy
      'mean_rho': jnp.mean(rhos),
      'mean_value': jnp.mean(values[:-1]),
      'mean_td_error': mean_td_error,
  }
  return loss, metrics
