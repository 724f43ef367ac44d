"""The pure IMPALA learner update: `TrainingState` and `sgd_step(state, batch)`.

Everything here is a pure function of arrays; iterators, counters, logging and
checkpointing live in the side-effecting learner loops (single-process or
distributed) that call it.
"""

import dataclasses
from typing import Any, Callable, Mapping, NamedTuple, Optional

import chex
import jax
import jax.numpy as jnp
import optax

from s3ta.learning import losses, optimizer
from s3ta.types import HYPERPARAM_NAMES, Trajectory
from s3ta.networks import AgentInput, Network
from s3ta.utils import dataclass_config

GRAD_CLIP_MODES = optimizer.CLIP_MODES


# Where the optimizer keeps HYPERPARAM_NAMES in `opt_state.hyperparams` (its own names).
_OPTIMIZER_NAMES = {'learning_rate': 'learning_rate', 'rmsprop_epsilon': 'epsilon',
                    'grad_clip': 'grad_clip'}


class TrainingState(NamedTuple):
  params: Any
  opt_state: Any  # optax.InjectHyperparamsState of optimizer.injected_rmsprop
  entropy_cost: Any  # float32 scalar (a loss weight, not an optimizer setting)
  steps: Any  # int32 scalar, number of sgd steps taken
  # float32 scalar added to the network's values, learned from the mean TD error, when
  # `value_offset_step_size` > 0; else None (no leaves: checkpoints are unchanged).
  value_offset: Any = None


@dataclasses.dataclass(frozen=True)
class LearnerConfig:
  """Fixed (compiled-in) learner settings; defaults are the paper's (App. A.1)."""
  learning_rate: float = 2e-4  # initial RMSProp learning rate
  # Linear anneal of the learning rate to 0 over this many sgd steps, as IMPALA (Espeholt
  # et al. 2018) and S3TA trained; 0 keeps it constant. The anneal starts at sgd step
  # `learning_rate_decay_begin` (0: from the first step).
  learning_rate_decay_steps: int = 0
  learning_rate_decay_begin: int = 0
  rmsprop_epsilon: float = 0.01  # inside the square root (TF semantics)
  rmsprop_decay: float = 0.99
  rmsprop_momentum: float = 0.0
  rmsprop_initial_scale: float = 1.0  # initial mean square: 1.0 as TF1 (IMPALA, S3TA); optax 0
  entropy_cost: float = 0.01
  baseline_cost: float = 0.5
  discount: float = 0.99
  max_abs_reward: float = 1.0  # rewards are clipped to [-max, max] before V-trace
  grad_clip: float = 1280.0  # threshold of gradient clipping
  grad_clip_mode: str = 'element'  # 'element' (paper), 'global_norm', 'update_rms' or 'none'
  clip_rho: float = 1.0
  clip_pg_rho: float = 1.0
  vtrace_lambda: float = 1.0
  # Halt after this many sgd steps in a row whose update was not finite (each is skipped).
  max_nonfinite_in_a_row: int = 10
  # 0 (off, the paper's learner) or the step size of a learned value offset: V(x) = offset +
  # network(x). The network's baseline loss is centred on the batch (the mean TD error
  # v_s - V(x_s) is taken out), and that mean error goes into the offset instead: all of the
  # first batch's, then a share falling to this step size. So the network learns how values
  # differ from their level, not the level itself (about -2 on Pong, where a random policy
  # loses a point every ~100 steps; cf. reward centering, Naik et al. 2024). Why: S3TA's
  # attention otherwise absorbs the level by collapsing onto one location within its first
  # updates, and stays there (BENCHMARKS.md, "`subtract_background` on Pong, one H100").
  value_offset_step_size: float = 0.0

  def __post_init__(self):
    if self.grad_clip_mode not in GRAD_CLIP_MODES:
      raise ValueError(f'Unknown grad_clip_mode {self.grad_clip_mode!r}; valid: {GRAD_CLIP_MODES}.')
    for name in ('learning_rate', 'rmsprop_epsilon', 'grad_clip', 'max_abs_reward'):
      if getattr(self, name) <= 0:
        raise ValueError(f'{name} must be > 0, got {getattr(self, name)}.')
    if not 0 <= self.discount <= 1:
      raise ValueError(f'discount must be in [0, 1], got {self.discount}.')
    if not 0 <= self.rmsprop_decay < 1:
      raise ValueError(f'rmsprop_decay must be in [0, 1), got {self.rmsprop_decay}.')
    for name in ('learning_rate_decay_steps', 'learning_rate_decay_begin'):
      if getattr(self, name) < 0:
        raise ValueError(f'{name} must be >= 0, got {getattr(self, name)}.')
    if self.max_nonfinite_in_a_row < 1:
      raise ValueError(f'max_nonfinite_in_a_row must be >= 1, got {self.max_nonfinite_in_a_row}.')
    if self.rmsprop_initial_scale < 0:
      raise ValueError(f'rmsprop_initial_scale must be >= 0, got {self.rmsprop_initial_scale}.')
    if not 0 <= self.value_offset_step_size <= 1:
      raise ValueError(f'value_offset_step_size must be in [0, 1] (0: off), got '
                       f'{self.value_offset_step_size}.')

  @classmethod
  def from_dict(cls, values: Any) -> 'LearnerConfig':
    return dataclass_config.from_dict(cls, values, 'learner')



def make_optimizer(config: LearnerConfig) -> optax.GradientTransformation:
  """The optax transform of `config`: injected TF1 RMSProp with the configured anneal."""
  return optimizer.injected_rmsprop(
      learning_rate=config.learning_rate, epsilon=config.rmsprop_epsilon,
      grad_clip=config.grad_clip,
      learning_rate_scale=optimizer.linear_anneal(config.learning_rate_decay_steps,
                                                  config.learning_rate_decay_begin), decay=config.rmsprop_decay,
      momentum=config.rmsprop_momentum, initial_scale=config.rmsprop_initial_scale,
      clip_mode=config.grad_clip_mode)


def init_training_state(network: Network, config: LearnerConfig, rng: jax.Array) -> TrainingState:
  params = network.init(rng)
  offset = jnp.float32(0) if config.value_offset_step_size > 0 else None
  return TrainingState(params, make_optimizer(config).init(params),
                       jnp.float32(config.entropy_cost), jnp.int32(0), offset)


def update_value_offset(offset: jax.Array, mean_td_error: jax.Array, step_size: float,
                        steps: jax.Array) -> jax.Array:
  """The offset moved by a share of the batch's mean TD error (v_s - V(x_s), V including the
  offset) after `steps` earlier updates; kept if that error is not finite. The share
  starts at 1 and falls to `step_size` (Sutton and Barto's unbiased constant-step-size
  trick), so the first batch's mean error goes into the offset at once."""
  rate = step_size / (1 - (1 - step_size)**(steps + 1).astype(jnp.float32))
  return jnp.where(jnp.isfinite(mean_td_error), offset + rate * mean_td_error, offset)


def get_hyperparams(state: TrainingState) -> dict:
  """{name: float32 scalar} for HYPERPARAM_NAMES, read from `state`."""
  values = {name: state.opt_state.hyperparams[key] for name, key in _OPTIMIZER_NAMES.items()}
  values['entropy_cost'] = state.entropy_cost
  return {name: values[name] for name in HYPERPARAM_NAMES}


def set_hyperparams(state: TrainingState, values: Mapping[str, float],
                    optimizer_names: Mapping[str, str] = _OPTIMIZER_NAMES) -> TrainingState:
  """`state` with the named hyperparameters replaced (same dtype and device; no recompile).

  `optimizer_names` maps config names to the optimizer's names in `opt_state.hyperparams`
  (IMPALA's by default; `ppo.OPTIMIZER_NAMES` for PPO's state); `entropy_cost` is the state's.
  """
  valid = [*optimizer_names, 'entropy_cost']
  unknown = sorted(set(values) - set(valid))
  if unknown:
    raise ValueError(f'Unknown hyperparameter name(s) {unknown}; valid: {valid}.')

  def like(current, value):  # same dtype, device and committedness: jit sees the same types
    new = jnp.asarray(value, current.dtype)
    # (a host numpy leaf, as restored from a checkpoint, has no placement to keep)
    return jax.device_put(new, current.sharding) if getattr(current, 'committed', False) else new

  injected = dict(state.opt_state.hyperparams)
  for name, key in optimizer_names.items():
    if name in values:
      injected[key] = like(injected[key], values[name])
  entropy_cost = state.entropy_cost
  if 'entropy_cost' in values:
    entropy_cost = like(entropy_cost, values['entropy_cost'])
  return state._replace(opt_state=state.opt_state._replace(hyperparams=injected),
                        entropy_cost=entropy_cost)


def resume_with_config(state: TrainingState, saved: Optional[Mapping[str, Any]],
                       current: Mapping[str, Any],
                       optimizer_names: Optional[Mapping[str, str]] = None) -> tuple:
  """(state, changes): a restored `state` with the hyperparameters that the run's config
  `current` sets differently from `saved`, the same config section stored in the checkpoint.

  The optimizer state carries the learning rate, epsilon and clip threshold (and the
  state the entropy cost), so without this a resume keeps the checkpoint's values and a
  changed flag is silently ignored. Values the config left as they were (a PBT member's
  evolved ones included) stay as restored. `changes` is {name: (saved, current)}.
  """
  optimizer_names = optimizer_names or _OPTIMIZER_NAMES
  names = [*optimizer_names, 'entropy_cost']
  changes = {name: (saved[name], current[name]) for name in names
             if saved and name in saved and name in current and saved[name] != current[name]}
  if not changes:
    return state, {}
  return (set_hyperparams(state, {name: new for name, (_, new) in changes.items()}, optimizer_names),
          changes)


def describe_config_changes(section: str, changes: Mapping[str, tuple]) -> str:
  """One console line for `resume_with_config`'s changes ('' when there are none)."""
  if not changes:
    return ''
  return ('resumed with config.' + section + ' changed since the checkpoint, applied: ' +
          ', '.join(f'{name} {old!r} -> {new!r}' for name, (old, new) in changes.items()))


def trajectory_loss(params, network: Network, config: LearnerConfig, batch: Trajectory,
                    entropy_cost, value_offset=None) -> tuple[jax.Array, dict]:
  """Unrolls the network over a [T+1, B] batch and returns `impala_loss` on it.

  With a `value_offset` (the learner's, when `value_offset_step_size` > 0) the values are
  the network's plus the offset, and the baseline loss is centred (`impala_loss`)."""
  steps = [batch.prev_action, batch.prev_reward, batch.is_first, batch.action, batch.reward,
           batch.discount]
  chex.assert_rank(steps, 2)
  chex.assert_equal_shape_prefix(steps + [batch.observation, batch.behaviour_logits], 2)
  chex.assert_type([batch.observation, batch.action, batch.reward, batch.discount],
                   [jnp.uint8, int, float, float])
  inputs = AgentInput(batch.observation, batch.prev_action, batch.prev_reward, batch.is_first)
  outputs, _ = network.unroll(params, inputs, batch.initial_state)
  rewards = jnp.clip(batch.reward[:-1], -config.max_abs_reward, config.max_abs_reward)
  values = outputs.value if value_offset is None else outputs.value + value_offset
  return losses.impala_loss(
      outputs.logits[:-1], values, batch.action[:-1], batch.behaviour_logits[:-1],
      rewards, config.discount * batch.discount[:-1],
      baseline_cost=config.baseline_cost, entropy_cost=entropy_cost, clip_rho=config.clip_rho,
      clip_pg_rho=config.clip_pg_rho, lambda_=config.vtrace_lambda,
      centre_baseline=value_offset is not None)


def make_sgd_step(network: Network, config: LearnerConfig,
                  jit: bool = True) -> Callable[[TrainingState, Trajectory], tuple[TrainingState, dict]]:
  """Returns the pure `sgd_step(state, batch) -> (state, metrics)` (jitted by default)."""

  optimizer_ = make_optimizer(config)

  def sgd_step(state: TrainingState, batch: Trajectory) -> tuple[TrainingState, dict]:
    grad_fn = jax.grad(trajectory_loss, has_aux=True)
    grads, metrics = grad_fn(state.params, network, config, batch, state.entropy_cost,
                             state.value_offset)
    metrics['grad_norm'] = optax.global_norm(grads)  # before clipping
    updates, opt_state = optimizer_.update(grads, state.opt_state, state.params)
    injected = opt_state.hyperparams  # the values this update used
    metrics['learning_rate'] = injected['learning_rate'] * injected['learning_rate_scale']
    metrics['nonfinite_in_a_row'], metrics['nonfinite_steps'] = optimizer.nonfinite_counts(opt_state)
    params = optax.apply_updates(state.params, updates)
    offset = state.value_offset
    if offset is not None:
      offset = update_value_offset(offset, metrics['mean_td_error'], config.value_offset_step_size,
                                   state.steps)
      metrics['value_offset'] = offset
    return TrainingState(params, opt_state, state.entropy_cost, state.steps + 1, offset), metrics

  return jax.jit(sgd_step) if jit else sgd_step
