"""Attention over time (paper 002's T-maze agent): multi-head attention over the last T views.

The observation is a frame stack [H, W, C * T] (oldest first, `config.env.frame_stack = T`;
C = `time_frame_channels`). Each view is embedded by 2-D convolutions into a query, a key
and a value per head (002 parameterises q, k and v with convolutions), with a sine-cosine
encoding of its age added to the keys' and values' input; the newest view's query attends
over all T views, so each head's map is a distribution over the past T steps (002 Fig. 6:
which past observations the agent keeps in focus). Heads are concatenated and passed to a
dense layer before the policy and value heads. Sizes: 4 heads, d_k 16, d_v 32 (002 Table 2).
"""

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from s3ta.networks.awrl import positional_encoding


class TimeAttentionTorso(nn.Module):
  """[N, H, W, C * T] views -> (features [N, D], maps [N, heads, T])."""
  config: Any  # NetworkConfig

  @nn.compact
  def __call__(self, frames):
    cfg = self.config
    dtype = cfg.compute_dtype
    n, height, width, total = frames.shape
    c = cfg.time_frame_channels
    steps = total // c
    views = (frames.astype(dtype) / 255.0).reshape(n, height, width, steps, c)
    views = jnp.moveaxis(views, 3, 1).reshape(n * steps, height, width, c)  # [N * T, H, W, C]
    age = jnp.asarray(positional_encoding(steps, 2 * c), dtype)  # [T, 2C], oldest first
    age_planes = jnp.broadcast_to(age[None, :, None, None, :], (n, steps, height, width, 2 * c))
    timed = jnp.concatenate([views, age_planes.reshape(n * steps, height, width, 2 * c)], -1)
    heads, dk, dv = cfg.time_heads, cfg.time_key_size, cfg.time_value_size
    conv = lambda size, name, x: nn.Conv(size, (height, width), padding='VALID', dtype=dtype,
                                         name=name)(x).reshape(n, steps, heads, -1)
    queries = conv(heads * dk, 'query', timed)[:, -1]  # the newest view asks: [N, heads, dk]
    keys = conv(heads * dk, 'key', timed)  # [N, T, heads, dk]
    values = conv(heads * dv, 'value', timed)  # [N, T, heads, dv]
    logits = jnp.einsum('nhd,nthd->nht', queries, keys).astype(jnp.float32) / jnp.sqrt(dk)
    maps = jax.nn.softmax(logits, axis=-1)  # [N, heads, T]
    read = jnp.einsum('nht,nthd->nhd', maps, values.astype(jnp.float32)).reshape(n, heads * dv)
    return nn.relu(nn.Dense(cfg.time_hidden, dtype=dtype, name='output')(read.astype(dtype))), maps
