"""RMSProp with TF semantics (epsilon inside the square root), hyperparameters as data.

IMPALA and S3TA trained with TensorFlow's RMSProp, whose update is
`lr * g / sqrt(ms + eps)`; optax's default puts eps outside the root. With the
paper's eps = 0.01 the two differ by 10x at small gradients (sqrt(0.01) = 0.1), so
we implement the TF form the published hyperparameters were tuned for. The
mean-square accumulator starts at zero (optax and Keras; TF1 started at one).
Learning rate and epsilon are arguments, not constants, so a jitted update can
change them every step without recompiling (PBT needs that).
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


class RMSPropState(NamedTuple):
  mean_square: Any  # pytree like params
  momentum: Any  # pytree like params (zeros and unused when momentum == 0)


def rmsprop_init(params) -> RMSPropState:
  zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
  return RMSPropState(mean_square=zeros, momentum=zeros)


def rmsprop_update(grads, state: RMSPropState, *, learning_rate, epsilon, decay: float,
                   momentum: float = 0.0):
  """Returns (updates to add to params, new state)."""
  mean_square = jax.tree_util.tree_map(lambda ms, g: decay * ms + (1.0 - decay) * jnp.square(g),
                                       state.mean_square, grads)
  steps = jax.tree_util.tree_map(lambda g, ms: learning_rate * g / jnp.sqrt(ms + epsilon), grads,
                                 mean_square)
  if momentum:
    mom = jax.tree_util.tree_map(lambda m, s: momentum * m + s, state.momentum, steps)
    steps = mom
  else:
    mom = state.momentum
  updates = jax.tree_util.tree_map(jnp.negative, steps)
  return updates, RMSPropState(mean_square, mom)
