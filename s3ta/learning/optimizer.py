"""The learner's optimizer: TF1's RMSProp as one optax transform with injected hyperparameters.

IMPALA and S3TA were tuned with TensorFlow 1's `RMSPropOptimizer`:
`ms <- decay * ms + (1 - decay) * g^2`, `update = -lr * g / sqrt(ms + eps)` (epsilon
inside the square root: optax's `eps_in_sqrt=True`) with `ms` initialised to 1.0
(optax's `initial_scale`; optax and Keras start at 0). Clipping comes first:
element-wise (the paper's [-1280, 1280]) or by global norm; or, 'update_rms', after the
RMS scaling: each parameter array's normalised step is capped at an RMS of `grad_clip`
(Adafactor's update clipping, Shazeer & Stern 2018), which bounds a step however the
gradient's size compares with the running mean square (a gradient clipped before
RMSProp still makes a long step where that mean square is small).

`optax.inject_hyperparams` keeps the learning rate, epsilon and clip threshold in
`opt_state.hyperparams`, where PBT reads and writes them without recompiling; the
learning-rate anneal is an injected schedule (`learning_rate_scale`) driven by the
optimizer's own step count. Inside, `optax.apply_if_finite` turns an update with a
NaN/Inf into no update (parameters and moments unchanged) and counts it; the learner
loops halt after `max_nonfinite_in_a_row` such steps.
"""

import functools
from typing import Callable

import jax.numpy as jnp
import optax

CLIP_MODES = ('element', 'global_norm', 'update_rms', 'none')
# Compiled-in arguments of `rmsprop`; the others are injected (opt_state.hyperparams).
STATIC_ARGS = ('decay', 'momentum', 'initial_scale', 'clip_mode')


def rmsprop(learning_rate, epsilon, grad_clip=None, *, decay: float, momentum: float = 0.0,
            initial_scale: float = 1.0, clip_mode: str = 'element',
            learning_rate_scale=1.0) -> optax.GradientTransformation:
  """Clipping (by `clip_mode`), then TF1 RMSProp with optional momentum, as one chain.

  The step is `learning_rate * learning_rate_scale`; `grad_clip` is ignored when
  `clip_mode` is 'none'.
  """
  if clip_mode not in CLIP_MODES:
    raise ValueError(f'Unknown grad_clip_mode {clip_mode!r}; valid: {CLIP_MODES}.')
  clip = {'element': optax.clip, 'global_norm': optax.clip_by_global_norm}.get(clip_mode)
  parts = [clip(grad_clip)] if clip is not None else []
  parts.append(optax.scale_by_rms(decay=decay, eps=epsilon, initial_scale=initial_scale,
                                  eps_in_sqrt=True))
  if clip_mode == 'update_rms':
    parts.append(optax.clip_by_block_rms(grad_clip))
  if momentum:
    parts.append(optax.trace(decay=momentum))
  parts.append(optax.scale_by_learning_rate(learning_rate * learning_rate_scale))
  return optax.chain(*parts)


def linear_anneal(steps: int, begin: int = 0) -> Callable:
  """Scale 1 -> 0 linearly over `steps` optimizer steps from step `begin`; constant 1 if steps is 0."""
  if not steps:
    return optax.constant_schedule(1.0)
  return optax.linear_schedule(1.0, 0.0, steps, transition_begin=begin)


def injected_rmsprop(*, learning_rate: float, epsilon: float, grad_clip: float,
                     learning_rate_scale: Callable, **static) -> optax.GradientTransformation:
  """`rmsprop` under `optax.inject_hyperparams` (float32 hyperparameters).

  `learning_rate_scale` is a schedule of the optimizer step (e.g. a linear anneal);
  `static` holds the STATIC_ARGS.
  """
  unknown = sorted(set(static) - set(STATIC_ARGS))
  if unknown:
    raise TypeError(f'Unknown static argument(s) {unknown}; valid: {list(STATIC_ARGS)}.')
  return optax.inject_hyperparams(skipping_nonfinite(rmsprop), static_args=STATIC_ARGS,
                                  hyperparam_dtype=jnp.float32)(
      learning_rate=learning_rate, epsilon=epsilon, grad_clip=grad_clip,
      learning_rate_scale=learning_rate_scale, **static)


def skipping_nonfinite(factory: Callable) -> Callable:
  """`factory` whose transform skips (and counts) non-finite updates; same signature."""

  @functools.wraps(factory)  # inject_hyperparams reads the signature through __wrapped__
  def guarded(*args, **kwargs) -> optax.GradientTransformation:
    # Never apply a non-finite update: the learner loop halts long before 2**31 in a row.
    return optax.apply_if_finite(factory(*args, **kwargs), max_consecutive_errors=2**31 - 1)

  return guarded


def nonfinite_counts(opt_state) -> tuple:
  """(consecutive, total) skipped non-finite updates of an injected, guarded optimizer's state."""
  guard = opt_state.inner_state
  return guard.notfinite_count, guard.total_notfinite
