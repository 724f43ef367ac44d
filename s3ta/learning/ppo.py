"""PPO (Schulman et al. 2017) for the single-machine trainer, built from rlax and optax.

The semantic-feature papers (002, 003) train their agents with PPO: clipped policy and
value losses, GAE, several epochs of minibatches over each rollout, Adam with
global-norm clipping. `make_ppo_update(network, config)` returns an update with the
same signature as IMPALA's `sgd_step(state, batch) -> (state, metrics)`, so the
single-machine trainer runs either. One call is one rollout: the values and the GAE
advantages come from the parameters before the update (the behaviour policy's logits
are in the batch), then `epochs` passes over `num_minibatches` minibatches of
environments, each a jitted optimizer step (arrays stay on the device throughout). Minibatches split the environment axis, so
recurrent agents keep whole unrolls from their stored initial state. Agents without recurrent
state (a frame stack is their memory) may instead draw minibatches of single steps from the
whole rollout (`minibatch_axis='samples'`, the usual PPO for feed-forward policies), so that
one minibatch is not one environment's 128 consecutive, strongly correlated steps.
"""

import dataclasses
from typing import Any, Callable

import chex
import jax
import jax.numpy as jnp
import optax

from s3ta.learning import optimizer
from s3ta.learning.learner_core import TrainingState
from s3ta.networks import AgentInput, Network
from s3ta.types import Trajectory
from s3ta.utils import dataclass_config
from s3ta.utils import rlax_import


MINIBATCH_AXES = ('envs', 'samples')


@dataclasses.dataclass(frozen=True)
class PPOConfig:
  """PPO settings; defaults are paper 002's Table 1 except the clip (0.1, the Atari value of
  Schulman et al. 2017; 002 uses 0.2, set by experiments/ram_features.py and tmaze.py)."""
  learning_rate: float = 2.5e-4  # Adam
  learning_rate_decay_updates: int = 0  # linear anneal to 0 over this many updates (0: constant)
  adam_epsilon: float = 1e-5
  max_grad_norm: float = 0.5  # global-norm clipping
  clip_epsilon: float = 0.1  # of the probability ratio (and of the value change)
  clip_value: bool = True
  gae_lambda: float = 0.95
  discount: float = 0.99
  epochs: int = 3
  num_minibatches: int = 4  # over the environments (or the steps) of one rollout
  minibatch_axis: str = 'envs'  # 'envs': whole unrolls; 'samples': shuffled steps (no recurrence)
  entropy_cost: float = 0.01
  value_cost: float = 0.5
  max_abs_reward: float = 1.0  # rewards clipped to [-max, max]
  normalize_advantages: bool = True  # per minibatch
  max_nonfinite_in_a_row: int = 10  # halt after this many skipped NaN/Inf minibatch steps

  def __post_init__(self):
    for name in ('learning_rate', 'adam_epsilon', 'max_grad_norm', 'clip_epsilon', 'max_abs_reward'):
      if getattr(self, name) <= 0:
        raise ValueError(f'ppo.{name} must be > 0, got {getattr(self, name)}.')
    for name in ('epochs', 'num_minibatches'):
      if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
        raise ValueError(f'ppo.{name} must be an integer >= 1, got {getattr(self, name)!r}.')
    if self.minibatch_axis not in MINIBATCH_AXES:
      raise ValueError(f'ppo.minibatch_axis must be one of {MINIBATCH_AXES}, got '
                       f'{self.minibatch_axis!r}.')
    if not isinstance(self.learning_rate_decay_updates, int) or self.learning_rate_decay_updates < 0:
      raise ValueError('ppo.learning_rate_decay_updates must be an integer >= 0, got '
                       f'{self.learning_rate_decay_updates!r}.')
    for name in ('gae_lambda', 'discount'):
      if not 0 <= getattr(self, name) <= 1:
        raise ValueError(f'ppo.{name} must be in [0, 1], got {getattr(self, name)}.')

  @classmethod
  def from_dict(cls, values: Any) -> 'PPOConfig':
    return dataclass_config.from_dict(cls, values, 'ppo')


def minibatch_units(config: PPOConfig, steps: int, num_envs: int) -> int:
  """What `num_minibatches` splits in a rollout of `steps` x `num_envs` (bootstrap step not
  counted): its environments, or with `minibatch_axis='samples'` its steps x environments."""
  return steps * num_envs if config.minibatch_axis == 'samples' else num_envs


# Where PPO's optimizer keeps its config's hyperparameters in `opt_state.hyperparams`.
OPTIMIZER_NAMES = {'learning_rate': 'learning_rate', 'adam_epsilon': 'epsilon'}


def make_optimizer(config: PPOConfig) -> optax.GradientTransformation:
  """Global-norm clipping then Adam, with the rate and epsilon in `opt_state.hyperparams`;
  non-finite updates are skipped and counted (as in IMPALA's optimizer)."""

  def clipped_adam(learning_rate, epsilon, learning_rate_scale):
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                       optax.adam(learning_rate * learning_rate_scale, eps=epsilon))

  steps_per_update = config.epochs * config.num_minibatches  # the schedule counts optimizer steps
  scale = optimizer.linear_anneal(config.learning_rate_decay_updates * steps_per_update)
  return optax.inject_hyperparams(optimizer.skipping_nonfinite(clipped_adam),
                                  hyperparam_dtype=jnp.float32)(
      learning_rate=config.learning_rate, epsilon=config.adam_epsilon, learning_rate_scale=scale)


def init_training_state(network: Network, config: PPOConfig, rng: jax.Array) -> TrainingState:
  params = network.init(rng)
  return TrainingState(params, make_optimizer(config).init(params),
                       jnp.float32(config.entropy_cost), jnp.int32(0))


def ppo_loss(logits: jax.Array, values: jax.Array, actions: jax.Array, behaviour_logits: jax.Array,
             advantages: jax.Array, returns: jax.Array, old_values: jax.Array, *,
             config: PPOConfig, entropy_cost) -> tuple[jax.Array, dict]:
  """The PPO loss of one minibatch, all [T, b] (logits [T, b, A]); means over steps.

  loss = clipped surrogate + value_cost * 0.5 * (clipped) squared value error
         + entropy_cost * (negative entropy). Advantages and returns carry no gradient.
  """
  time, batch = actions.shape
  chex.assert_shape([logits, behaviour_logits], (time, batch, None))
  chex.assert_shape([values, advantages, returns, old_values], (time, batch))
  rlax = rlax_import.rlax
  per_unroll = lambda f: jax.vmap(f, in_axes=1)  # rlax works on one [T] sequence
  ratios = rlax.categorical_importance_sampling_ratios(logits, behaviour_logits, actions)
  if config.normalize_advantages:
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
  pg_loss = jnp.mean(per_unroll(
      lambda r, a: rlax.clipped_surrogate_pg_loss(r, a, config.clip_epsilon))(ratios, advantages))
  returns = jax.lax.stop_gradient(returns)
  value_loss = jnp.square(values - returns)
  if config.clip_value:
    clipped = old_values + jnp.clip(values - old_values, -config.clip_epsilon, config.clip_epsilon)
    value_loss = jnp.maximum(value_loss, jnp.square(clipped - returns))
  value_loss = 0.5 * jnp.mean(value_loss)
  entropy_loss = jnp.mean(per_unroll(rlax.entropy_loss)(logits, jnp.ones_like(values)))
  loss = pg_loss + config.value_cost * value_loss + entropy_cost * entropy_loss
  metrics = dict(loss=loss, pg_loss=pg_loss, baseline_loss=value_loss, entropy=-entropy_loss,
                 mean_rho=jnp.mean(ratios),
                 clip_fraction=jnp.mean(jnp.abs(ratios - 1.0) > config.clip_epsilon))
  return loss, metrics


def gae(rewards: jax.Array, discounts: jax.Array, values: jax.Array,
        lambda_: float) -> tuple[jax.Array, jax.Array]:
  """(advantages [T, B], returns [T, B]) from rewards/discounts [T, B] and values [T + 1, B]."""
  advantages = jax.vmap(
      lambda r, d, v: rlax_import.rlax.truncated_generalized_advantage_estimation(r, d, lambda_, v),
      in_axes=1, out_axes=1)(rewards, discounts, values)
  return advantages, advantages + values[:-1]


def make_ppo_update(network: Network, config: PPOConfig,
                    seed: int = 0) -> Callable[[TrainingState, Trajectory], tuple[TrainingState, dict]]:
  """`update(state, rollout) -> (state, metrics)`: epochs x minibatches of jitted PPO steps.

  `rollout` is a [T + 1, B] Trajectory (B, or T x B with `minibatch_axis='samples'`,
  divisible by `num_minibatches`); minibatches are shuffled environments (or steps), drawn
  from a key folded from `seed` and `state.steps`.
  `state.steps` counts updates (rollouts); metrics are the means over the minibatches.
  """
  optimizer_ = make_optimizer(config)
  by_samples = config.minibatch_axis == 'samples'
  if by_samples and jax.tree_util.tree_leaves(network.initial_state(1)):
    raise ValueError("ppo.minibatch_axis='samples' needs an agent without recurrent state; "
                     f"network.kind {network.config.kind!r} has one: use 'envs'.")

  def unroll(params, batch: Trajectory):
    inputs = AgentInput(batch.observation, batch.prev_action, batch.prev_reward, batch.is_first)
    outputs, _ = network.unroll(params, inputs, batch.initial_state)
    return outputs

  def minibatch_loss(params, batch: Trajectory, advantages, returns, old_values, entropy_cost):
    outputs = unroll(params, batch)
    cut = (lambda x: x) if by_samples else (lambda x: x[:-1])  # unrolls end in the bootstrap step
    return ppo_loss(cut(outputs.logits), cut(outputs.value), cut(batch.action),
                    cut(batch.behaviour_logits), advantages, returns, old_values,
                    config=config, entropy_cost=entropy_cost)

  def units(rollout: Trajectory) -> int:
    steps, num_envs = rollout.action.shape[:2]
    return minibatch_units(config, steps - 1, num_envs)  # the last step only bootstraps

  @jax.jit
  def prepare(state: TrainingState, rollout: Trajectory):
    """Pre-update values, GAE targets and the units (envs or steps) of every minibatch."""
    old_values = unroll(state.params, rollout).value  # [T + 1, B]
    rewards = jnp.clip(rollout.reward[:-1], -config.max_abs_reward, config.max_abs_reward)
    advantages, returns = gae(rewards, config.discount * rollout.discount[:-1], old_values,
                              config.gae_lambda)
    key = jax.random.fold_in(jax.random.PRNGKey(seed), state.steps)
    count = units(rollout)
    order = jnp.concatenate([jax.random.permutation(k, count)
                             for k in jax.random.split(key, config.epochs)])
    return advantages, returns, old_values[:-1], order.reshape(-1, count // config.num_minibatches)

  def select(rollout: Trajectory, targets, index):
    """The minibatch `index` picks: [T + 1, b] unrolls of environments, or [1, n] steps."""
    if by_samples:  # feed-forward: each step's observation is all the agent needs
      pick = lambda x: jnp.take(x.reshape((-1,) + x.shape[2:]), index, axis=0)[None]
      steps = jax.tree_util.tree_map(lambda x: pick(x[:-1]), rollout._replace(initial_state=()))
      return steps._replace(initial_state=rollout.initial_state), [pick(t) for t in targets]
    take = lambda x: jnp.take(x, index, axis=1)
    batch = jax.tree_util.tree_map(take, rollout._replace(initial_state=()))._replace(
        initial_state=jax.tree_util.tree_map(lambda x: jnp.take(x, index, axis=0),
                                             rollout.initial_state))
    return batch, [take(t) for t in targets]

  @jax.jit
  def minibatch_step(params, opt_state, rollout: Trajectory, targets, index, entropy_cost):
    """One optimizer step on the minibatch `index` of the rollout."""
    batch, batch_targets = select(rollout, targets, index)
    grads, metrics = jax.grad(minibatch_loss, has_aux=True)(params, batch, *batch_targets,
                                                            entropy_cost)
    metrics['grad_norm'] = optax.global_norm(grads)
    updates, opt_state = optimizer_.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, metrics

  def update(state: TrainingState, rollout: Trajectory) -> tuple[TrainingState, dict]:
    if units(rollout) % config.num_minibatches:
      what = 'steps (T x B)' if by_samples else 'environments'
      raise ValueError(f'ppo.num_minibatches ({config.num_minibatches}) must divide the '
                       f'{what} of a rollout ({units(rollout)}).')
    *targets, order = prepare(state, rollout)
    # A host loop of one jitted step per minibatch, not a lax.scan: XLA:CPU runs convolution
    # gradients inside a while loop several times slower, and unrolling compiles for minutes.
    params, opt_state, steps = state.params, state.opt_state, []
    for i in range(order.shape[0]):
      params, opt_state, metrics = minibatch_step(params, opt_state, rollout, targets, order[i],
                                                  state.entropy_cost)
      steps.append(metrics)
    metrics = jax.tree_util.tree_map(lambda *xs: jnp.mean(jnp.stack(xs)), *steps)
    metrics['learning_rate'] = (opt_state.hyperparams['learning_rate'] *
                                opt_state.hyperparams['learning_rate_scale'])  # of the last step
    metrics['nonfinite_in_a_row'], metrics['nonfinite_steps'] = optimizer.nonfinite_counts(opt_state)
    return TrainingState(params, opt_state, state.entropy_cost, state.steps + 1), metrics

  return update