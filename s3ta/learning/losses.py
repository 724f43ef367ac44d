"""The IMPALA loss: V-trace policy gradient, baseline and entropy terms (rlax).

Time-major, summed over time and batch, as in Espeholt et al. (2018).
"""

import jax
import jax.numpy as jnp
from s3ta.utils import rlax_import  # rlax, or its V-trace stand-in where rlax does not import


def impala_loss(logits: jax.Array, values: jax.Array, actions: jax.Array,
                behaviour_logits: jax.Array, rewards: jax.Array, discounts: jax.Array, *,
                baseline_cost: float = 0.5, entropy_cost: float = 0.01, clip_rho: float = 1.0,
                clip_pg_rho: float = 1.0, lambda_: float = 1.0) -> tuple[jax.Array, dict]:
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
  Returns:
    (loss, metrics) with loss = pg + baseline_cost * baseline + entropy_cost * entropy,
    pg = -sum(pg_advantage * log pi(a)), baseline = 0.5 * sum((v_s - V(x_s))^2) and
    entropy = sum(pi * log pi) (the negative entropy). Targets and advantages carry no
    gradient.
  """
  log_pi = jax.nn.log_softmax(logits)
  log_pi_a = jnp.take_along_axis(log_pi, actions[..., None], axis=-1)[..., 0]
  log_mu_a = jnp.take_along_axis(jax.nn.log_softmax(behaviour_logits), actions[..., None],
                                 axis=-1)[..., 0]
  rhos = jax.lax.stop_gradient(jnp.exp(log_pi_a - log_mu_a))

  vtrace = jax.vmap(
      lambda v_tm1, v_t, r_t, d_t, rho: rlax_import.rlax.vtrace_td_error_and_advantage(
          v_tm1, v_t, r_t, d_t, rho, lambda_=lambda_, clip_rho_threshold=clip_rho,
          clip_pg_rho_threshold=clip_pg_rho, stop_target_gradients=True),
      in_axes=1, out_axes=1)
  out = vtrace(values[:-1], values[1:], rewards, discounts, rhos)
  td_errors = out.errors  # v_s - V(x_s), target side already stop-gradient
  pg_advantage = jax.lax.stop_gradient(out.pg_advantage)

  pg_loss = -jnp.sum(pg_advantage * log_pi_a)
  baseline_loss = 0.5 * jnp.sum(jnp.square(td_errors))
  entropy_loss = jnp.sum(jnp.exp(log_pi) * log_pi)
  loss = pg_loss + baseline_cost * baseline_loss + entropy_cost * entropy_loss
  metrics = {
      'loss': loss,
      'pg_loss': pg_loss,
      'baseline_loss': baseline_loss,
      'entropy': -entropy_loss / (logits.shape[0] * logits.shape[1]),  # mean per-step entropy
      'mean_rho': jnp.mean(rhos),
      'mean_value': jnp.mean(values[:-1]),
  }
  return loss, metrics
