"""Attention over time (paper 002's T-maze agent): multi-head self-attention over the last T views.

The observation is a frame stack [H, W, C * T] (oldest first, `config.env.frame_stack = T`;
C = `time_frame_channels`). Each view is embedded by 2-D convolutions into a query, a key
and a value per head (002 parameterises q, k and v with convolutions), with a sine-cosine
encoding of its age concatenated to the view. Every view attends over all T views; each
view's heads are concatenated and projected back to d_v, and the T tokens, flattened
[T * d_v], go straight into the linear policy and value heads, as 002 Table 4 counts them
(policy 5,125 = 1,024 x 5 + 5 and value 1,025 for T = 32, d_v = 32). So the policy reads
every step's token through its own weights: the newest view's content is not diluted in
an average over 32 views, which it was in a first version that let only the newest view
ask (its agent stayed uniform on the random-start maze; BENCHMARKS.md, T-maze).
`time_readout='newest'` lets the heads read only the newest view's token, d_v numbers
(its own values with `time_residual`, plus what it read from the past): what the agent
learns at one view then carries over to every history, where the flattened tokens give
each of the T steps its own head weights.
`time_activation` is the tokens' nonlinearity. With 'relu' every PPO run on the random-start
maze ended with all 1,024 token units dead on every observation, so the agent's logits
and value were constants (entropy exactly ln 5): the value loss (rewards are rare) and the
entropy bonus both reward a constant output, and dead ReLUs are a constant output with no
gradient back. 'leaky_relu' keeps a gradient for every unit, yet PPO still pushed 92 % of
them below zero for good; 'none' (linear tokens; experiments/tmaze.py:attention) cannot
collapse that way, and the softmax attention is still nonlinear in the views.
`time_token_norm` normalises each token over its d_v channels before that nonlinearity:
'layer' is a LayerNorm with a learned scale and shift; 'scale_only' drops the shift, so each
token's units keep mean zero before the scale and no parameter can push them all below zero
at once. (Under 'layer' PPO did just that with the shift: 0.14-0.41 below zero on every
unit, 9 % of unit-view pairs positive, no learning in 650 K steps; BENCHMARKS.md, T-maze.)
`time_hidden` > 0 puts a dense layer between the tokens and the heads, with the nonlinearity
`time_hidden_activation`. Alone, its units all died (relu) or saturated (tanh) under PPO and
the agent never left the random level; `time_hidden_skip` gives the heads the tokens as well
as the units, so the linear path that learns stays and the units can only add to it.
`time_residual` adds each view's own values to what it reads, the residual connection of a
Transformer layer (no parameters): at initialisation attention is near uniform, so without
it every token is close to the mean of all T views' values, the current view weighs 1/T
in what the policy sees, and the agent starts nearly blind to where it is (it stayed
uniform on the random-start maze; BENCHMARKS.md, T-maze).
The maps kept for analysis are the newest view's rows, [heads, T]: what the agent looks
back at now (002 Fig. 6). Sizes: 4 heads, d_k 16, d_v 32 (002 Table 2).
"""

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from s3ta.networks.activations import ACTIVATIONS
from s3ta.networks.awrl import positional_encoding

READOUTS = ('all', 'newest')
TOKEN_NORMS = ('none', 'layer', 'scale_only')


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
    queries = conv(heads * dk, 'query', timed)  # [N, T, heads, dk]
    keys = conv(heads * dk, 'key', timed)  # [N, T, heads, dk]
    values = conv(heads * dv, 'value', timed)  # [N, T, heads, dv]
    logits = jnp.einsum('nqhd,nthd->nhqt', queries, keys).astype(jnp.float32) / jnp.sqrt(dk)
    maps = jax.nn.softmax(logits, axis=-1)  # [N, heads, T (asking), T (read)]
    read = jnp.einsum('nhqt,nthd->nqhd', maps, values.astype(jnp.float32))
    if cfg.time_residual:
      read = read + values.astype(jnp.float32)  # each view keeps its own content
    tokens = nn.Dense(dv, dtype=dtype, name='output')(read.reshape(n, steps, heads * dv).astype(dtype))
    if cfg.time_token_norm != 'none':
      tokens = nn.LayerNorm(use_bias=cfg.time_token_norm == 'layer', dtype=dtype,
                            name='token_norm')(tokens)  # over d_v, per token
    features = ACTIVATIONS[cfg.time_activation](tokens)  # [N, T, d_v]
    features = features[:, -1] if cfg.time_readout == 'newest' else features.reshape(n, steps * dv)
    if cfg.time_hidden:
      hidden = ACTIVATIONS[cfg.time_hidden_activation](
          nn.Dense(cfg.time_hidden, dtype=dtype, name='hidden')(features))
      features = jnp.concatenate([features, hidden], -1) if cfg.time_hidden_skip else hidden
    return features, maps[:, :, -1]
