"""The learner's optimizer: TF1's RMSProp as an optax chain, its hyperparameters as data.

IMPALA and S3TA were tuned with TensorFlow 1's `RMSPropOptimizer`:
`ms <- decay * ms + (1 - decay) * g^2`, `update = -lr * g / sqrt(ms + eps)` (epsilon
inside the square root: optax's `eps_in_sqrt=True`) with `ms` initialised to 1.0
(optax's `initial_scale`; optax and Keras start at 0). Clipping comes first:
element-wise (the paper's [-1280, 1280]) or by global norm. optax does all of it.

Learning rate, epsilon and the clip threshold may be traced values: the learner
builds this chain inside its jitted step from `TrainingState.hyperparams` (what
`optax.inject_hyperparams` does, with the values kept where PBT reads and writes
them), so changing them never recompiles.
"""

import optax

CLIP_MODES = ('element', 'global_norm', 'none')


def rmsprop(*, learning_rate, epsilon, decay: float, momentum: float = 0.0,
            initial_scale: float = 1.0, grad_clip=None,
            clip_mode: str = 'element') -> optax.GradientTransformation:
  """Clipping (by `clip_mode`), then TF1 RMSProp with optional momentum, as one transform."""
  if clip_mode not in CLIP_MODES:
    raise ValueError(f'Unknown grad_clip_mode {clip_mode!r}; valid: {CLIP_MODES}.')
  clip = {'element': optax.clip, 'global_norm': optax.clip_by_global_norm}.get(clip_mode)
  parts = [clip(grad_clip)] if clip is not None else []
  parts.append(optax.scale_by_rms(decay=decay, eps=epsilon, initial_scale=initial_scale,
                                  eps_in_sqrt=True))
  if momentum:
    parts.append(optax.trace(decay=momentum))
  parts.append(optax.scale_by_learning_rate(learning_rate))
  return optax.chain(*parts)
