"""Attention-weighted RL over semantic features (paper 003): d-AWRL and g-AWRL torsos.

The observation [F, T, 1] (`s3ta/envs/atari_ram.py`) becomes L = F * T tokens, one per
feature and time step, each its byte scaled to [0, 1] with a sine-cosine encoding of its
position (the feature's address in the observation, fixed for a run) appended. Two
attention modules follow, each a multi-head dot-product attention layer (4 heads,
d_k = d_v = 32), a linear up-scaling applied to each token separately, and a
normalisation layer (003 Sec. 5).

- g-AWRL (`gawrl`): full self-attention, so tokens can be selected and mixed; the
  tokens are then flattened into a fully connected layer before the policy and value
  heads. Its nonlinearity is `awrl_hidden_activation` ('relu' by default, for older
  checkpoints). That layer's pre-activations are mostly a per-unit offset the observation
  barely moves (the address encodings dominate the tokens), so on RAM Pong PPO left 5 of
  its 64 relu units ever positive, saturated tanh units, and made a linear layer's offset
  a constant logit bias (BENCHMARKS.md, RAM-feature Pong). Our LayerNorm keeps that offset
  (so would 003's batch norm with statistics per channel over batch and tokens).
  `awrl_centre_tokens` removes it without batch statistics (so acting and learning stay
  one function): a mid-range observation (every feature 0.5, the centre of the scaled
  range) goes through the attention modules with the batch, and its tokens are
  subtracted from every observation's. One extra row per call. On RAM Pong at
  initialisation the offset falls from 0.53 to 0.021 (spread 0.013), and 81 % of the
  units are positive on some observations, against 44 % (an all-zero reference: 55 %).
  Centred alone, that input still moves only 0.013, so Adam's steps on the layer's bias
  soon decide each unit's sign again (31 % alive by 0.9 M frames); `awrl_norm_before_hidden`
  LayerNorms the centred tokens, scaling what the observation changes to O(1) (spread 0.25).
  With both, PPO's g-AWRL reached -19.1 by 4 M frames, but 78 % of the units still died
  (leaky relu: 84 % never positive by 1.8 M frames). `awrl_hidden = 0` drops the layer:
  the flattened tokens go straight into the linear heads, as in 002's attention agent
  (Table 3) and in d-AWRL, the one of the two that learned.
  Why none of these started may lie before that layer: g-AWRL's modules have no residual
  path, and at initialisation their maps are near uniform (largest weight 0.034-0.055 of
  32 tokens), so every token reads about the same mixture. On random Pong observations the
  32 tokens of a sample differ by 0.040 (std over tokens) after the first module and by
  0.000 after the second, against 0.62 and 0.84 in d-AWRL: the flattened tokens are 32
  copies of one vector. `awrl_residual` adds each token's own embedding to what it reads
  (a transformer's residual; the T-maze agent's `time_residual` did the same for its views):
  the tokens then differ by 0.15, but one token still moves only 0.019 across observations
  (0.014 without; d-AWRL 0.10-0.24), since its byte is one input beside 16 address channels
  and each token is normalised alone. `awrl_norm_over='tokens'` normalises each channel
  over the sample's tokens instead (003's batch norm keeps statistics per channel too, over
  batch and tokens): the mixture every token shares is subtracted, and at initialisation
  one token moves 0.31 across observations (0.14 with the residual). On RAM Pong: BENCHMARKS.md.
- d-AWRL (`dawrl`): selection only. Each head's map keeps only the diagonal of
  Q K^T / sqrt(d_k), a softmax over the tokens (a 1-D map), so token i becomes
  a_i * e_i and no two tokens mix. No hidden layer follows: the flattened tokens go
  straight into the linear policy and value heads, so value and logits are sums of
  per-token terms with each token's own weights, V = sum_i W^i s_i (003 Eq. 6).

`awrl_attention` conditions the queries and keys on 'both' (content and address),
'content' only or 'address' only (003 Experiment 3; with 'address' every map is static);
the embeddings always see both. In 'content' mode the first layer's tokens carry no
position at all for q and k, and later layers attend from the mixed tokens.
Deviation from 003: LayerNorm instead of batch normalisation, so that an actor's
single step and the learner's batch compute the same function. g-AWRL normalises each
token (or each channel, `awrl_norm_over`); d-AWRL normalises over all of a sample's
tokens and channels together, because a per-token
norm would divide each a_i * e_i by its own scale and erase the selection (batch norm,
with statistics over the batch, keeps it).
"""

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from s3ta.networks.activations import ACTIVATIONS

ATTENTION_SOURCES = ('both', 'content', 'address')
NORM_OVER = ('channels', 'tokens')  # g-AWRL's LayerNorm statistics: per token, or per channel


def positional_encoding(length: int, size: int) -> np.ndarray:
  """[length, size] sine-cosine encoding of token positions (Vaswani et al. 2017)."""
  positions = np.arange(length)[:, None]
  rates = 1.0 / (10000.0 ** (np.arange(0, size, 2) / size))
  encoding = np.zeros((length, size), np.float32)
  encoding[:, 0::2] = np.sin(positions * rates)
  encoding[:, 1::2] = np.cos(positions * rates)[:, :size // 2]
  return encoding


class SplitTokens(NamedTuple):
  """Tokens as their per-sample content [B, L, c] and an address part [L, a] that every sample
  shares: the first module's input, kept apart so its projections of the addresses are
  computed once per token rather than once per sample (`TokenDense`)."""
  content: jax.Array
  address: jax.Array


class TokenDense(nn.Module):
  """`nn.Dense` over tokens, with its parameters (names, shapes, initialisers), so checkpoints
  and initialisations are unchanged. On `SplitTokens` it multiplies the address rows of the
  kernel once per token and adds them to every sample's content product: with Pong's 1 content
  and 16 address channels, 16/17 of the first module's projection work (and of its gradient's)
  no longer scales with the batch. Hand-written because `nn.Dense` cannot take its input in
  two parts."""
  features: int
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, tokens):
    split = isinstance(tokens, SplitTokens)
    width = tokens.content.shape[-1] + tokens.address.shape[-1] if split else tokens.shape[-1]
    kernel = self.param('kernel', nn.initializers.lecun_normal(), (width, self.features), jnp.float32)
    bias = self.param('bias', nn.initializers.zeros_init(), (self.features,), jnp.float32)
    kernel, bias = kernel.astype(self.dtype), bias.astype(self.dtype)
    if not split:
      return jnp.dot(tokens.astype(self.dtype), kernel) + bias
    content_width = tokens.content.shape[-1]
    shared = jnp.dot(tokens.address.astype(self.dtype), kernel[content_width:]) + bias  # [L, out]
    if not content_width:  # addresses only: [L, out], the same for every sample
      return shared
    return jnp.dot(tokens.content.astype(self.dtype), kernel[:content_width]) + shared


class AttentionModule(nn.Module):
  """Multi-head dot-product attention over tokens, per-token up-scaling, LayerNorm.

  Returns the new tokens [B, L, model_size] and the attention maps: [B, heads, L, L]
  (full) or [B, heads, L] (selection only).
  """
  num_heads: int
  key_size: int
  model_size: int
  selection_only: bool
  dtype: Any = jnp.float32
  residual: bool = False  # full attention: each token adds its own embedding to what it reads
  norm_over: str = 'channels'  # full attention: LayerNorm statistics of each token over its
  # channels, or of each channel over the sample's 'tokens' (`NORM_OVER`)

  @nn.compact
  def __call__(self, tokens, attend_from):
    """tokens, attend_from: [B, L, channels] arrays or `SplitTokens`."""
    batch, length = (tokens.content if isinstance(tokens, SplitTokens) else tokens).shape[:2]
    project = lambda name, x: jnp.broadcast_to(
        TokenDense(self.num_heads * self.key_size, self.dtype, name=name)(x),
        (batch, length, self.num_heads * self.key_size)).reshape(
            batch, length, self.num_heads, self.key_size)
    queries, keys = project('query', attend_from), project('key', attend_from)
    embeddings = project('embedding', tokens)
    scale = 1.0 / np.sqrt(self.key_size)
    if self.selection_only:  # the diagonal of Q K^T: one score per token, softmax over tokens
      logits = jnp.einsum('blhd,blhd->bhl', queries, keys).astype(jnp.float32) * scale
      weights = jax.nn.softmax(logits, axis=-1)  # [B, heads, L]
      mixed = jnp.einsum('bhl,blhd->blhd', weights, embeddings.astype(jnp.float32))
    else:
      logits = jnp.einsum('bihd,bjhd->bhij', queries, keys).astype(jnp.float32) * scale
      weights = jax.nn.softmax(logits, axis=-1)  # [B, heads, L, L], rows sum to 1
      mixed = jnp.einsum('bhij,bjhd->bihd', weights, embeddings.astype(jnp.float32))
      if self.residual:  # a near-uniform map would otherwise give every token the same mixture
        mixed = mixed + embeddings.astype(jnp.float32)
    mixed = mixed.reshape(batch, length, self.num_heads * self.key_size).astype(self.dtype)
    upscaled = nn.Dense(self.model_size, dtype=self.dtype, name='upscale')(mixed)
    # Selection only: statistics over tokens and channels, so token i keeps its weight a_i.
    axes = (-2, -1) if self.selection_only else {'channels': -1, 'tokens': -2}[self.norm_over]
    norm = nn.LayerNorm(reduction_axes=axes, feature_axes=-1, dtype=jnp.float32, name='norm')
    return norm(upscaled.astype(jnp.float32)), weights


class AWRLTorso(nn.Module):
  """d-AWRL or g-AWRL over [N, F, T, 1] feature histories; returns (features [N, D], maps).

  `maps` are the first module's attention maps (what 003's figures show).
  """
  config: Any  # NetworkConfig

  @nn.compact
  def __call__(self, frames):
    cfg = self.config
    dtype = cfg.compute_dtype
    batch = frames.shape[0]
    selection_only = cfg.kind == 'dawrl'
    centre = cfg.awrl_centre_tokens and not selection_only
    if centre:  # a mid-range observation (every byte 128) rides along as the last row
      frames = jnp.concatenate([frames, jnp.full_like(frames[:1], 128)])
    rows = frames.shape[0]  # batch, plus the reference row when centring
    values = (frames.astype(jnp.float32) / 255.0).reshape(rows, -1, 1)
    length = values.shape[1]  # L = F * T tokens
    position = jnp.asarray(positional_encoding(length, cfg.awrl_position_size), dtype)  # [L, a]
    tokens = SplitTokens(values.astype(dtype), position)  # the first module's [values, position]
    first_maps = None
    for i in range(cfg.awrl_layers):
      # What queries and keys see: 'address' keeps every map static (positions only);
      # 'content' gives the first layer the values alone (later tokens hold content only).
      address_only = SplitTokens(values[..., :0].astype(dtype), position) if i == 0 else tokens
      attend_from = {'both': tokens, 'address': address_only,
                     'content': values.astype(dtype) if i == 0 else tokens}[cfg.awrl_attention]
      tokens, maps = AttentionModule(cfg.awrl_heads, cfg.awrl_key_size, cfg.awrl_model_size,
                                     selection_only, dtype, cfg.awrl_residual,
                                     cfg.awrl_norm_over, name=f'attention_{i}')(
                                         tokens, attend_from)
      first_maps = maps if first_maps is None else first_maps
    if centre:  # what the observation changes, less the per-unit offset common to all
      tokens, first_maps = tokens[:-1] - tokens[-1:], first_maps[:-1]
    flat = tokens.reshape(batch, -1).astype(dtype)
    if selection_only:  # the linear heads make value and logits sums of per-token terms
      return flat, first_maps
    if cfg.awrl_norm_before_hidden:  # scales what the observation changes (tiny) to O(1)
      flat = nn.LayerNorm(dtype=jnp.float32, name='hidden_input_norm')(
          flat.astype(jnp.float32)).astype(dtype)
    if not cfg.awrl_hidden:  # 002's read-out: the linear heads see every token
      return flat, first_maps
    hidden = nn.Dense(cfg.awrl_hidden, dtype=dtype, name='output')(flat)
    return ACTIVATIONS[cfg.awrl_hidden_activation](hidden), first_maps
