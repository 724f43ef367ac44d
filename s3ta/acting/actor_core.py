"""Pure actor functions: sample an action from the network for a batch of envs.

Jitted once per actor (on CPU in the distributed program). The side-effecting
loops that step environments call these and record trajectories with
`UnrollAccumulator`.
"""

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from s3ta.envs.base import EnvStep
from s3ta.networks import AgentInput, AgentState, Network


class ActorOutput(NamedTuple):
  action: Any  # int32 [B]
  logits: Any  # float32 [B, A]
  value: Any  # float32 [B]


def agent_input(env_step: EnvStep, prev_action) -> AgentInput:
  """What the agent sees: previous action and reward are zeroed at episode starts.

  NumPy in, NumPy out (host loops); jax arrays in, jax arrays out (inside the
  single-machine trainer's jitted step).
  """
  xp = jnp if isinstance(env_step.is_first, jax.Array) else np
  first = xp.asarray(env_step.is_first, bool)
  return AgentInput(observation=env_step.observation,
                    prev_action=xp.where(first, 0, prev_action).astype(np.int32),
                    prev_reward=xp.where(first, 0.0, env_step.reward).astype(np.float32),
                    is_first=first)


def make_select_action(network: Network, greedy: bool = False, jit: bool = True,
                       device=None) -> Callable:
  """Returns `select_action(params, rng, inputs [B], state) -> (ActorOutput, state)`."""

  def select_action(params, rng, inputs: AgentInput, state: AgentState, attention_threshold=0.0):
    outputs, next_state = network.step(params, inputs, state, attention_threshold)
    if greedy:
      action = jnp.argmax(outputs.logits, axis=-1)
    else:
      action = jax.random.categorical(rng, outputs.logits)
    return ActorOutput(action.astype(jnp.int32), outputs.logits, outputs.value), next_state

  if not jit:
    return select_action
  jitted = jax.jit(select_action)
  if device is None:
    return jitted

  def select_action_on_device(*args, **kwargs):
    # Inputs committed to `device` make the jitted call run there; `jax.jit(device=...)`
    # did the same but is deprecated since JAX 0.4.31 (a warning on 0.5 and 0.11).
    return jitted(*jax.device_put(args, device), **jax.device_put(kwargs, device))

  return select_action_on_device
