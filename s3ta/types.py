"""Data types shared across roles (acting, replay, learning): the bottom layer, importing nothing from s3ta."""

from typing import Any, NamedTuple

# Learner hyperparameters that may change between sgd steps without recompiling (what PBT
# evolves). All but `entropy_cost` live in the optimizer state (s3ta/learning/learner_core.py).
HYPERPARAM_NAMES = ('learning_rate', 'entropy_cost', 'rmsprop_epsilon', 'grad_clip')


class Trajectory(NamedTuple):
  """An unroll of T + 1 steps of B environments, time-major [T + 1, B, ...].

  Step t is: the agent sees `observation` (with `prev_action`, `prev_reward`,
  `is_first`), the behaviour policy with `behaviour_logits` picks `action`, and the
  environment answers with `reward` and `discount` (0 when that action ended the
  episode, else 1). The last step is only used to bootstrap (its value) and is the
  first step of the next unroll of the same environment.
  """
  observation: Any  # uint8 [T+1, B, H, W, C]
  prev_action: Any  # int32 [T+1, B]
  prev_reward: Any  # float32 [T+1, B]
  is_first: Any  # bool [T+1, B]
  action: Any  # int32 [T+1, B]
  behaviour_logits: Any  # float32 [T+1, B, A]
  reward: Any  # float32 [T+1, B], unclipped
  discount: Any  # float32 [T+1, B], environment discount in {0, 1}
  initial_state: Any  # AgentState pytree [B, ...]: the recurrent state before step 0
