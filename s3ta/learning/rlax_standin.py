"""Pure-JAX stand-ins for the rlax functions the IMPALA loss uses, for stacks where rlax does not import.

`s3ta.utils.rlax_import` uses this module in place of rlax when rlax fails to import
(e.g. on JAX 0.11, where rlax -> distrax -> TFP breaks). It provides
`vtrace_td_error_and_advantage`, `categorical_importance_sampling_ratios`,
`policy_gradient_loss`, `entropy_loss` (IMPALA) and `clipped_surrogate_pg_loss`,
`truncated_generalized_advantage_estimation` (PPO) with rlax 0.1.7's semantics and arithmetic
order, so results agree to float rounding (tests/test_rlax_standin.py compares them
on the pinned stack). V-trace: Espeholt et al. (2018), eq. 1 and §4.2.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


class VTraceOutput(NamedTuple):
  """Per-step V-trace results, each [T]."""
  errors: jax.Array  # v_s - V(x_s): the baseline's TD errors (targets stop-gradient if asked)
  pg_advantage: jax.Array  # clipped rho * (q_estimate - V(x_s)), the policy-gradient advantage
  q_estimate: jax.Array  # r_t + discount_t * v_{s+1}, the V-trace Q estimate


def _check(v_tm1, v_t, r_t, discount_t, rho_tm1, lambda_) -> None:
  """Raises ValueError naming the argument whose rank or shape is wrong."""
  arrays = {'v_tm1': v_tm1, 'v_t': v_t, 'r_t': r_t, 'discount_t': discount_t, 'rho_tm1': rho_tm1}
  for name, array in arrays.items():
    if jnp.ndim(array) != 1:
      raise ValueError(f'{name} must be a vector [T], got shape {jnp.shape(array)}.')
  shapes = {name: jnp.shape(array) for name, array in arrays.items()}
  if len(set(shapes.values())) != 1:
    raise ValueError(f'v_tm1, v_t, r_t, discount_t and rho_tm1 must have equal shapes, got {shapes}.')
  if jnp.ndim(lambda_) not in (0, 1) or (jnp.ndim(lambda_) == 1 and
                                         jnp.shape(lambda_) != shapes['v_tm1']):
    raise ValueError(f'lambda_ must be a scalar or a vector of shape {shapes["v_tm1"]}, '
                     f'got shape {jnp.shape(lambda_)}.')


def vtrace_td_error_and_advantage(v_tm1: jax.Array, v_t: jax.Array, r_t: jax.Array,
                                  discount_t: jax.Array, rho_tm1: jax.Array, lambda_: Any = 1.0,
                                  clip_rho_threshold: Any = 1.0, clip_pg_rho_threshold: Any = 1.0,
                                  stop_target_gradients: Any = True) -> VTraceOutput:
  """V-trace TD errors, policy-gradient advantages and Q estimates for one unroll.

  Same arguments and results as `rlax.vtrace_td_error_and_advantage` (rlax 0.1.7).

  Args:
    v_tm1: [T] values V(x_s) at the steps whose actions are evaluated.
    v_t: [T] values V(x_{s+1}) of the next steps (v_t[-1] bootstraps).
    r_t: [T] rewards of each transition.
    discount_t: [T] discounts of each transition (0 at episode ends).
    rho_tm1: [T] importance ratios pi(a_s | x_s) / mu(a_s | x_s).
    lambda_: scalar or [T] trace mixing (c_s = lambda * min(1, rho_s)).
    clip_rho_threshold: rho-bar, the truncation of the ratios in the TD errors.
    clip_pg_rho_threshold: the truncation of the ratios in the policy-gradient advantage.
    stop_target_gradients: if true, `errors` carry gradient only through -V(x_s).
  Returns:
    VTraceOutput(errors, pg_advantage, q_estimate), each [T].
  Raises:
    ValueError: an input is not [T], the shapes differ, or lambda_ is neither scalar nor [T].
  """
  _check(v_tm1, v_t, r_t, discount_t, rho_tm1, lambda_)
  lambda_ = jnp.ones_like(discount_t) * lambda_  # [T]

  # Truncated importance weights: c_s for the traces, rho-bar_s for the TD errors.
  trace_weights = jnp.minimum(1.0, rho_tm1) * lambda_
  td_errors = jnp.minimum(clip_rho_threshold, rho_tm1) * (r_t + discount_t * v_t - v_tm1)

  # v_s - V(x_s) = delta_s + discount_s * c_s * (v_{s+1} - V(x_{s+1})), accumulated backwards.
  def backward(acc, step):
    delta, discount, c = step
    acc = delta + discount * c * acc
    return acc, acc

  _, errors = jax.lax.scan(backward, jnp.zeros_like(td_errors[0]),
                           (td_errors, discount_t, trace_weights), reverse=True)
  errors = jax.lax.select(stop_target_gradients,
                          jax.lax.stop_gradient(errors + v_tm1) - v_tm1, errors)

  # Q estimate: r_s + discount_s * (lambda v_{s+1} + (1 - lambda) V(x_{s+1})); the last
  # step bootstraps from v_t[-1].
  targets_tm1 = errors + v_tm1
  q_bootstrap = jnp.concatenate(
      [lambda_[:-1] * targets_tm1[1:] + (1 - lambda_[:-1]) * v_tm1[1:], v_t[-1:]], axis=0)
  q_estimate = r_t + discount_t * q_bootstrap
  pg_advantage = jnp.minimum(clip_pg_rho_threshold, rho_tm1) * (q_estimate - v_tm1)
  return VTraceOutput(errors=errors, pg_advantage=pg_advantage, q_estimate=q_estimate)


def categorical_importance_sampling_ratios(pi_logits_t: jax.Array, mu_logits_t: jax.Array,
                                           a_t: jax.Array) -> jax.Array:
  """pi(a_t) / mu(a_t) for categorical policies given by logits [..., A]; actions [...]."""
  log_pi_a = _log_prob(pi_logits_t, a_t)
  log_mu_a = _log_prob(mu_logits_t, a_t)
  return jnp.exp(log_pi_a - log_mu_a)


def policy_gradient_loss(logits_t: jax.Array, a_t: jax.Array, adv_t: jax.Array, w_t: jax.Array,
                         use_stop_gradient: bool = True) -> jax.Array:
  """mean_t(-log pi(a_t) * adv_t * w_t) for one sequence: logits [T, A], the rest [T]."""
  _check_ranks({'logits_t': (logits_t, 2), 'a_t': (a_t, 1), 'adv_t': (adv_t, 1), 'w_t': (w_t, 1)})
  adv_t = jax.lax.select(use_stop_gradient, jax.lax.stop_gradient(adv_t), adv_t)
  return jnp.mean(-_log_prob(logits_t, a_t) * adv_t * w_t)


def entropy_loss(logits_t: jax.Array, w_t: jax.Array) -> jax.Array:
  """-mean_t(H(pi_t) * w_t) for one sequence: logits [T, A], weights [T]."""
  _check_ranks({'logits_t': (logits_t, 2), 'w_t': (w_t, 1)})
  entropy = -jnp.nansum(jax.nn.softmax(logits_t) * jax.nn.log_softmax(logits_t), axis=-1)
  return -jnp.mean(entropy * w_t)


def clipped_surrogate_pg_loss(prob_ratios_t: jax.Array, adv_t: jax.Array, epsilon: Any,
                              use_stop_gradient: bool = True) -> jax.Array:
  """PPO's clipped surrogate, -mean_t(min(r_t * adv_t, clip(r_t, 1 +- epsilon) * adv_t)); [T] inputs."""
  _check_ranks({'prob_ratios_t': (prob_ratios_t, 1), 'adv_t': (adv_t, 1)})
  adv_t = jax.lax.select(use_stop_gradient, jax.lax.stop_gradient(adv_t), adv_t)
  clipped_ratios_t = jnp.clip(prob_ratios_t, 1. - epsilon, 1. + epsilon)
  return -jnp.mean(jnp.fmin(prob_ratios_t * adv_t, clipped_ratios_t * adv_t))


def truncated_generalized_advantage_estimation(r_t: jax.Array, discount_t: jax.Array, lambda_: Any,
                                               values: jax.Array,
                                               stop_target_gradients: bool = False) -> jax.Array:
  """GAE advantages [T] from rewards and discounts [T] and values [T + 1] (Schulman et al. 2016)."""
  _check_ranks({'r_t': (r_t, 1), 'discount_t': (discount_t, 1), 'values': (values, 1)})
  lambda_ = jnp.ones_like(discount_t) * lambda_
  delta_t = r_t + discount_t * values[1:] - values[:-1]

  def backward(acc, step):
    delta, discount, lam = step
    acc = delta + discount * lam * acc
    return acc, acc

  _, advantage_t = jax.lax.scan(backward, 0.0, (delta_t, discount_t, lambda_), reverse=True)
  return jax.lax.select(stop_target_gradients, jax.lax.stop_gradient(advantage_t), advantage_t)


def _log_prob(logits: jax.Array, actions: jax.Array) -> jax.Array:
  """log softmax(logits)[action], by a one-hot sum as rlax/distrax compute it."""
  one_hot = jax.nn.one_hot(actions, logits.shape[-1], dtype=logits.dtype)
  return jnp.sum(jax.nn.log_softmax(logits) * one_hot, axis=-1)


def _check_ranks(arrays: dict) -> None:
  """Raises ValueError naming the first argument whose rank is not the expected one."""
  for name, (array, rank) in arrays.items():
    if jnp.ndim(array) != rank:
      raise ValueError(f'{name} must have rank {rank}, got shape {jnp.shape(array)}.')
