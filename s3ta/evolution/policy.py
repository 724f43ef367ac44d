"""The AttentionAgent as a function of one flat parameter vector, batched over candidates.

CMA-ES searches over flat vectors; `FlatAgent` maps a vector to the agent's Flax
parameters (`jax.flatten_util.ravel_pytree` fixes the layout) and runs one step for a
batch of environments in which every environment may play a different candidate
(`jax.vmap` over vectors, carries and frames). The action layer's output goes through
tanh (004's agents emit values in [-1, 1]; each task maps them to its actions).
"""

import dataclasses
from typing import Any

import jax
from jax import flatten_util
import jax.numpy as jnp
import numpy as np

from s3ta.networks import attention_agent as agent_lib


def agent_config(config: Any, output_size: int) -> agent_lib.AttentionAgentConfig:
  """The agent's sizes from a config's `agent` block, with the task's output size."""
  fields = {f.name for f in dataclasses.fields(agent_lib.AttentionAgentConfig)}
  values = {k: int(config[k]) for k in fields if k != 'num_actions'}
  return agent_lib.AttentionAgentConfig(**values, num_actions=output_size)


class FlatAgent:
  """Flat-vector view of an AttentionAgent: size, initial vector, batched jitted step."""

  def __init__(self, config: agent_lib.AttentionAgentConfig, seed: int = 0):
    self.config = config
    self.module = agent_lib.AttentionAgent(config)
    template = agent_lib.init(config, jax.random.PRNGKey(seed))
    flat, self._unravel = flatten_util.ravel_pytree(template)
    self.initial = np.asarray(flat, np.float64)  # Flax's initialisation, a starting mean
    self.size = int(flat.size)
    self._step = jax.jit(jax.vmap(self._one_step))

  def params(self, vector) -> Any:
    """Flax parameters of a flat vector."""
    return self._unravel(jnp.asarray(vector, jnp.float32))

  def _one_step(self, vector, carry, image):
    carry, out = self.module.apply({'params': self.params(vector)}, jax.tree_util.tree_map(
        lambda x: x[None], carry), image[None])
    carry = jax.tree_util.tree_map(lambda x: x[0], carry)
    return carry, jax.tree_util.tree_map(lambda x: x[0], out._replace(action=jnp.tanh(out.action)))

  def vector(self, params) -> np.ndarray:
    """The flat vector of Flax parameters (the inverse of `params`)."""
    return np.asarray(flatten_util.ravel_pytree(params)[0], np.float64)

  def initial_carry(self, batch: int):
    zeros = np.zeros((batch, self.config.lstm_size), np.float32)
    return zeros, zeros.copy()

  def step(self, vectors, carry, images):
    """vectors [B, P], carry ([B, H], [B, H]), images uint8 [B, 96, 96, 3] ->
    (carry, AgentStep with action in [-1, 1] [B, A], importance [B, N], top [B, K], centres)."""
    return self._step(jnp.asarray(vectors, jnp.float32), carry, jnp.asarray(images))
