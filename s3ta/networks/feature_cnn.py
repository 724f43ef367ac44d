"""The convolutional baselines over semantic features (papers 002 and 003): CNN and a-CNN.

The observation [F, T, 1] is read as a sequence of F features with T channels (each
feature's recent history), bytes scaled to [0, 1].

- CNN (`cnn1d`, 003 Fig. 1A): two layers, each three parallel 1-D convolutions of
  widths 3, 5 and 7 over the feature axis ('SAME' padding, ReLU), concatenated along
  channels; then a fully connected layer before the heads. A filter relates at most
  seven neighbouring features, so distant features meet only in the dense layer.
- a-CNN (`acnn`, 003 Sec. 5): width-3 convolutions stacked until one output position
  sees every feature (ceil((F - 1) / 2) layers, at most 20), then the dense layer.
"""

import math
from typing import Any

import flax.linen as nn
import jax.numpy as jnp

WIDTHS = (3, 5, 7)
MAX_ACNN_LAYERS = 20


def acnn_layers(num_features: int) -> int:
  """Width-3 layers for one output to see all `num_features` (receptive field 2n + 1)."""
  return max(1, min(MAX_ACNN_LAYERS, math.ceil((num_features - 1) / 2)))


class FeatureCNNTorso(nn.Module):
  """`cnn1d` or `acnn` over [N, F, T, 1] feature histories; returns features [N, D]."""
  config: Any  # NetworkConfig

  @nn.compact
  def __call__(self, frames):
    cfg = self.config
    dtype = cfg.compute_dtype
    x = frames.astype(dtype)[..., 0] / 255.0  # [N, F, T]: T channels per feature
    channels = cfg.cnn_channels
    if cfg.kind == 'cnn1d':
      for layer in range(2):
        x = jnp.concatenate([
            nn.relu(nn.Conv(channels, (width,), padding='SAME', dtype=dtype,
                            name=f'layer_{layer}_width_{width}')(x)) for width in WIDTHS], axis=-1)
    else:
      for layer in range(acnn_layers(frames.shape[1])):
        x = nn.relu(nn.Conv(channels, (3,), padding='SAME', dtype=dtype, name=f'layer_{layer}')(x))
    x = x.reshape(x.shape[0], -1)
    return nn.relu(nn.Dense(cfg.cnn_hidden, dtype=dtype, name='output')(x))
