"""The S3TA agent network, its ablations, and the baselines (IMPALA ResNet, Nature CNN; Flax).

Paper 000, §2, §4, §4.4 and Appendix A.1 (Table 2). Every network unrolls over
time-major inputs `[T, B, ...]`: the non-recurrent convolutional torso runs once
over all T*B frames, then `nn.scan` steps the recurrent core (no Python loop over
time). Recurrent state is reset to zeros at steps whose `is_first` is set.
"""

import dataclasses
import math
from typing import Any, NamedTuple, Optional, Sequence

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from s3ta.networks import activations
from s3ta.networks import attention as attention_lib
from s3ta.networks import awrl
from s3ta.networks import feature_cnn
from s3ta.networks import time_attention
from s3ta.utils import dataclass_config

NETWORK_KINDS = ('s3ta', 'fixed_query', 'l2_keys', 'resnet', 'resnet_lstm', 'nature',
                 'nature_lstm', 'mlp', 'dawrl', 'gawrl', 'cnn1d', 'acnn', 'time_attention')
# Feed-forward torsos that also return attention maps: paper 003 over RAM features
# (awrl.py), paper 002's attention over the last T views (time_attention.py).
FEATURE_ATTENTION_KINDS = ('dawrl', 'gawrl', 'time_attention')
ATTENTION_KINDS = ('s3ta', 'fixed_query', 'l2_keys')
RECURRENT_BASELINES = ('resnet_lstm', 'nature_lstm')  # LSTM core with previous action/reward


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
  """Sizes of the agent network; the defaults are the paper's (Table 2)."""
  kind: str = 's3ta'  # one of NETWORK_KINDS
  conv_channels: Sequence[int] = (32, 64)  # vision core ConvNet channels
  conv_kernels: Sequence[int] = (8, 4)  # its square kernel sizes
  conv_strides: Sequence[int] = (4, 2)  # its strides ('SAME' padding)
  vision_lstm_channels: int = 128  # ConvLSTM channels (keys + values)
  vision_lstm_kernel: int = 3  # ConvLSTM kernel size
  key_channels: int = 8  # channels of the ConvLSTM output used as keys
  num_heads: int = 4  # attention heads (queries)
  basis_frequencies: int = 4  # spatial basis: (2F)^2 channels
  query_hidden: Sequence[int] = (256, 128)  # query MLP hidden layers
  answer_hidden: Sequence[int] = (512, 256)  # answer processor MLP
  lstm_size: int = 256  # policy core LSTM
  head_hidden: int = 128  # MLP before the policy and value heads
  query_init_scale: float = 1.0  # std multiplier of the query output layer's initialisation
  query_input_norm: bool = False  # LayerNorm the policy LSTM's previous hidden state before the
  # query MLP: that state starts near zero, so queries (and what a step can change in them) do too
  key_norm: bool = False  # LayerNorm each location's key channels (not the basis) before the
  # logits: the ConvLSTM's outputs start small, so content barely moves the logits at first
  subtract_background: bool = False  # attention kinds: subtract each frame's per-channel median
  # (the background colour of most Atari screens) before the ConvNet, so the background reads as
  # zero and only the objects drive the keys (Pong's attention probe: BENCHMARKS.md)
  query_norm: bool = False  # LayerNorm each head's query (all 72 channels) after the query MLP:
  # the queries start near zero (the policy LSTM's state does), so the attention starts uniform
  resnet_channels: Sequence[int] = (16, 32, 32)  # IMPALA deep ResNet stages
  resnet_blocks: int = 2  # residual blocks per stage
  resnet_hidden: int = 256  # ResNet output layer
  nature_channels: Sequence[int] = (32, 64, 64)  # Mnih et al. (2015) torso ('VALID' padding)
  nature_kernels: Sequence[int] = (8, 4, 3)
  nature_strides: Sequence[int] = (4, 2, 1)
  nature_hidden: int = 512  # its fully connected layer
  mlp_hidden: Sequence[int] = (64, 64)  # 'mlp': hidden layers over flattened features (RAM)
  awrl_heads: int = 4  # d-/g-AWRL (paper 003): heads per attention module
  awrl_key_size: int = 32  # d_k = d_v
  awrl_model_size: int = 32  # per-token up-scaling output
  awrl_layers: int = 2  # attention modules
  awrl_position_size: int = 16  # sine-cosine encoding of each token's address (even)
  awrl_hidden: int = 64  # g-AWRL's fully connected layer before the heads; 0: the flattened
  # tokens go straight into the linear heads (002's attention agent, Table 3's 6,150 / 1,025)
  awrl_hidden_activation: str = 'relu'  # its nonlinearity (`activations.ACTIVATIONS`); relu
  # as in 003; 'tanh' and 'none' did no better on RAM Pong (BENCHMARKS.md)
  awrl_centre_tokens: bool = False  # g-AWRL: subtract a mid-range observation's tokens before
  # that layer (its per-unit offset; awrl.py). False here so that older checkpoints behave alike
  awrl_norm_before_hidden: bool = False  # g-AWRL: LayerNorm over the flattened tokens before it
  awrl_attention: str = 'both'  # queries/keys from 'both', 'content' or 'address'
  awrl_residual: bool = False  # g-AWRL: each token adds its own embedding to its attention read
  # (not in 003; without it a near-uniform map leaves every token the same mixture; awrl.py)
  awrl_norm_over: str = 'channels'  # g-AWRL's LayerNorms: each token over its 'channels', or
  # each channel over the sample's 'tokens' (like 003's batch norm, per sample; awrl.py).
  # d-AWRL ignores these two and the centring, as the other kinds ignore every awrl_ field: its
  # tokens a_i * e_i keep their own embedding, and it normalises over the whole sample.
  cnn_channels: int = 32  # 'cnn1d' / 'acnn' (feature CNN baselines): filters per convolution
  cnn_hidden: int = 64  # their fully connected layer before the heads
  time_heads: int = 4  # 'time_attention' (002's T-maze agent): heads over the past views
  time_key_size: int = 16  # d_k
  time_value_size: int = 32  # d_v
  time_hidden: int = 64  # a dense layer before the heads; 0: the tokens go straight in (002;
  # experiments/tmaze.py), kept at 64 here so that older checkpoints of every kind still resume
  time_readout: str = 'all'  # what the heads read: 'all' T tokens flattened (002 Table 4) or
  # the 'newest' view's token only (its own values plus what it read from the past)
  time_activation: str = 'relu'  # the tokens' nonlinearity: 'relu', 'leaky_relu' or 'none'
  time_token_norm: str = 'none'  # each token over d_v before `time_activation`: 'none',
  # 'layer' (LayerNorm) or 'scale_only' (LayerNorm without its learned shift)
  time_hidden_activation: str = 'relu'  # the dense layer's (`time_hidden` > 0): any of ACTIVATIONS
  time_hidden_skip: bool = False  # with `time_hidden` > 0: the heads read the tokens as well as the
  # dense layer's units (a linear path beside the nonlinear one), not the units alone
  time_previous_inputs: bool = False  # also feed the previous action and reward to its heads
  lstm_previous_inputs: bool = True  # 'resnet_lstm' / 'nature_lstm': previous action and reward
  # into the LSTM with the torso's features (False: the views alone, like 002's attention agent)
  time_residual: bool = False  # add each view's own values to what it reads (residual
  # connection; experiments/tmaze.py:attention); False here so that older checkpoints behave alike
  time_frame_channels: int = 3  # channels of one view in the frame stack
  dtype: str = 'float32'  # compute dtype: 'float32' or 'bfloat16'
  remat: bool = False  # recompute each scanned core step in the backward pass (less memory)
  scan_unroll: int = 1  # core steps per iteration of the scan's loop (`jax.lax.scan`'s unroll):
  # larger fuses across steps (a speed knob for accelerators); the same numbers either way

  def __post_init__(self):
    if self.kind not in NETWORK_KINDS:
      raise ValueError(f'Unknown network kind {self.kind!r}; valid kinds: {NETWORK_KINDS}.')
    if self.dtype not in ('float32', 'bfloat16'):
      raise ValueError(f"network dtype must be 'float32' or 'bfloat16', got {self.dtype!r}.")
    for prefix in ('conv', 'nature'):
      sizes = [getattr(self, f'{prefix}_{n}') for n in ('channels', 'kernels', 'strides')]
      if not len(sizes[0]) == len(sizes[1]) == len(sizes[2]):
        raise ValueError(f'{prefix}_channels, {prefix}_kernels and {prefix}_strides must have '
                         f'equal lengths, got {sizes[0]}, {sizes[1]}, {sizes[2]}.')
    for name in ('conv_channels', 'conv_kernels', 'conv_strides', 'nature_channels',
                 'nature_kernels', 'nature_strides', 'resnet_channels'):
      sizes = tuple(getattr(self, name))
      if not all(isinstance(n, (int, np.integer)) and n >= 1 for n in sizes):
        raise ValueError(f'{name} must be integers >= 1, got {sizes}.')
    if not 0 < self.key_channels < self.vision_lstm_channels:
      raise ValueError(f'key_channels must be in (0, vision_lstm_channels={self.vision_lstm_channels}), '
                       f'got {self.key_channels}.')
    for name in ('num_heads', 'basis_frequencies', 'lstm_size', 'head_hidden', 'nature_hidden',
                 'scan_unroll'):
      if getattr(self, name) < 1:
        raise ValueError(f'{name} must be >= 1, got {getattr(self, name)}.')
    for name in ('awrl_heads', 'awrl_key_size', 'awrl_model_size', 'awrl_layers',
                 'cnn_channels', 'cnn_hidden', 'time_heads', 'time_key_size',
                 'time_value_size', 'time_frame_channels'):
      if getattr(self, name) < 1:
        raise ValueError(f'{name} must be >= 1, got {getattr(self, name)}.')
    choices = {'time_readout': time_attention.READOUTS, 'time_token_norm': time_attention.TOKEN_NORMS,
               'awrl_attention': awrl.ATTENTION_SOURCES, 'awrl_norm_over': awrl.NORM_OVER,
               **{name: tuple(activations.ACTIVATIONS) for name in (
                   'time_activation', 'time_hidden_activation', 'awrl_hidden_activation')}}
    for name, allowed in choices.items():
      if getattr(self, name) not in allowed:
        raise ValueError(f'{name} must be one of {allowed}, got {getattr(self, name)!r}.')
    if self.subtract_background and self.kind not in ATTENTION_KINDS:
      raise ValueError(f'subtract_background=True applies to the attention kinds {ATTENTION_KINDS} '
                       f'only, got kind={self.kind!r}; set network.subtract_background=False.')
    if self.query_norm and self.kind != 's3ta':
      raise ValueError(f"query_norm=True applies to kind='s3ta' only (the one with a query "
                       f"network), got kind={self.kind!r}; set network.query_norm=False.")
    if self.key_norm and self.kind == 'l2_keys':
      raise ValueError("key_norm=True does not apply to kind='l2_keys': its logits are the keys' "
                       'norms, which a LayerNorm would make equal everywhere; set '
                       'network.key_norm=False for this kind.')
    for name in ('time_hidden', 'awrl_hidden'):
      if getattr(self, name) < 0:
        raise ValueError(f'{name} must be >= 0 (0: no dense layer), got {getattr(self, name)}.')
    if self.time_hidden_skip and not self.time_hidden:
      raise ValueError('time_hidden_skip=True needs a dense layer beside the linear path '
                       '(time_hidden > 0), got time_hidden=0.')
    if self.awrl_position_size < 2 or self.awrl_position_size % 2:
      raise ValueError(f'awrl_position_size must be an even number >= 2, got '
                       f'{self.awrl_position_size}.')
    if not self.mlp_hidden or min(self.mlp_hidden) < 1:
      raise ValueError(f'mlp_hidden must be one or more sizes >= 1, got {tuple(self.mlp_hidden)}.')

  @property
  def compute_dtype(self) -> jnp.dtype:
    """`dtype` as JAX's dtype. Not `jnp.dtype('bfloat16')`: once TensorFlow is imported (the
    pinned stack's rlax imports it) that name is TF's own bfloat16, which JAX rejects."""
    return jnp.dtype({'float32': jnp.float32, 'bfloat16': jnp.bfloat16}[self.dtype])

  @property
  def basis_channels(self) -> int:
    return (2 * self.basis_frequencies)**2

  @property
  def query_size(self) -> int:
    """Channels of a query: keys plus basis (72 in the paper)."""
    return self.key_channels + self.basis_channels

  @property
  def answer_size(self) -> int:
    """Channels of an answer: values plus basis (184 in the paper)."""
    return self.vision_lstm_channels - self.key_channels + self.basis_channels

  def vision_shape(self, observation_shape: Sequence[int]) -> tuple[int, int]:
    """Spatial size (h, w) of the vision core output for an [H, W, C] frame."""
    height, width = observation_shape[:2]
    for stride in self.conv_strides:
      height, width = math.ceil(height / stride), math.ceil(width / stride)
    return height, width

  @classmethod
  def from_dict(cls, values: Any) -> 'NetworkConfig':
    """Builds from a dict or ConfigDict, rejecting unknown fields by name."""
    values = dict(values.to_dict() if hasattr(values, 'to_dict') else values)
    return dataclass_config.from_dict(
        cls, {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}, 'network')


class AgentInput(NamedTuple):
  """What the agent sees at one step; leading dims [T, B] (or [B] for a step)."""
  observation: Any  # uint8 [H, W, C] frame
  prev_action: Any  # int32, the action taken before this step (0 at episode start)
  prev_reward: Any  # float32, the reward that came with this observation
  is_first: Any  # bool, an episode starts here: recurrent state is reset first


class AgentOutput(NamedTuple):
  """Per-step outputs. `attention` and `queries` are None for the ResNet baselines."""
  logits: Any  # [..., A]
  value: Any  # [...]
  attention: Optional[Any] = None  # [..., num_heads, h, w], each head sums to 1
  queries: Optional[Any] = None  # [..., num_heads, query_size]


class AgentState(NamedTuple):
  """Recurrent state: ConvLSTM (c, h) and policy LSTM (c, h); () where absent."""
  vision: Any
  core: Any


def _mlp(sizes: Sequence[int], dtype, name_prefix: str):
  layers = []
  for i, size in enumerate(sizes):
    layers += [nn.Dense(size, dtype=dtype, name=f'{name_prefix}_{i}'), nn.relu]
  return nn.Sequential(layers) if layers else (lambda x: x)


def _reset(state, is_first):
  """Zeroes each state leaf [B, ...] where is_first [B] is set."""
  def reset_leaf(leaf):
    keep = 1.0 - is_first.astype(leaf.dtype)
    return leaf * keep.reshape(keep.shape + (1,) * (leaf.ndim - 1))
  return jax.tree_util.tree_map(reset_leaf, state)


def _previous_inputs(prev_action, prev_reward, num_actions, dtype):
  """One-hot previous action and clipped previous reward, [B, A + 1]."""
  reward = jnp.clip(prev_reward.astype(jnp.float32), -1.0, 1.0)[:, None]
  return jnp.concatenate([jax.nn.one_hot(prev_action, num_actions), reward], axis=-1).astype(dtype)


class PolicyValueHead(nn.Module):
  """Optional hidden layer, then linear policy-logit and value heads (in float32)."""
  num_actions: int
  hidden: int = 0
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x):
    if self.hidden:
      x = nn.relu(nn.Dense(self.hidden, dtype=self.dtype, name='hidden')(x))
    x = x.astype(jnp.float32)
    logits = nn.Dense(self.num_actions, name='policy')(x)
    value = nn.Dense(1, name='value')(x)[..., 0]
    return logits, value


class ConvLSTMGates(nn.Module):
  """The recurrent half of a ConvLSTM step, for use inside `nn.scan`.

  The input-to-gates convolution is non-recurrent, so `ConvTorso` applies it to all
  T*B frames at once; here we add the hidden-to-gates convolution, written as
  patches @ kernel: XLA:CPU runs a convolution's backward pass inside a while loop
  about 8x slower than the equivalent matmul (measured: BENCHMARKS.md).
  Gate order and equations follow `flax.linen.ConvLSTMCell`.
  """
  features: int
  kernel_size: int
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, carry, input_gates):
    c, h = carry
    patches = jax.lax.conv_general_dilated_patches(
        h.astype(self.dtype), (self.kernel_size, self.kernel_size), (1, 1), 'SAME',
        dimension_numbers=('NHWC', 'HWIO', 'NHWC'))
    gates = input_gates + nn.Dense(4 * self.features, use_bias=False, dtype=self.dtype,
                                   name='hidden_to_gates')(patches)
    i, g, f, o = jnp.split(gates.astype(jnp.float32), 4, axis=-1)
    new_c = nn.sigmoid(f) * c + nn.sigmoid(i) * jnp.tanh(g)
    new_h = nn.sigmoid(o) * jnp.tanh(new_c)
    return (new_c, new_h), new_h


def background_median(frames: jax.Array, dtype: Any = jnp.float32) -> jax.Array:
  """Per-frame, per-channel median over h x w of `frames` [N, H, W, C] scaled by 1/255:
  [N, 1, 1, C], equal to `sort_median(frames, dtype)`.

  For uint8 frames it counts instead of sorting (`order_statistic_uint8`): XLA's CPU sort
  cost 17.6 ms per 16 gray 84x84 frames here against 0.63 ms, 60 % of S3TA's CPU inference.
  """
  if frames.dtype != jnp.uint8:
    return sort_median(frames, dtype)
  axis = (1, 2)
  n = frames.shape[1] * frames.shape[2]
  low = order_statistic_uint8(frames, (n + 1) // 2, axis=axis)
  high = low
  if n % 2 == 0:  # the next order statistic: low again, or the smallest value above it
    low_count = jnp.sum(frames <= low, axis=axis, keepdims=True)
    above = jnp.min(jnp.where(frames > low, frames, 255), axis=axis, keepdims=True)
    high = jnp.where(low_count > n // 2, low, above.astype(jnp.int32))
  scaled = lambda level: (level.astype(dtype) / 255.0).astype(jnp.float32)
  return ((scaled(low) + scaled(high)) * 0.5).astype(dtype)  # jnp.median's midpoint


def sort_median(frames: jax.Array, dtype: Any = jnp.float32) -> jax.Array:
  """`jnp.median` of the scaled frames over h x w (a comparator sort in XLA)."""
  return jnp.median((frames.astype(dtype) / 255.0).astype(jnp.float32), axis=(1, 2),
                    keepdims=True).astype(dtype)


def order_statistic_uint8(values: jax.Array, k: int, axis: Sequence[int]) -> jax.Array:
  """The k-th smallest (1-based) of uint8 `values` along `axis` (kept as size 1), int32.

  A binary search over the 8 bits of the answer, one count per bit: the largest v with
  fewer than k values below it. Sort-free, so cheap on CPU (jnp.sort is a comparator sort).
  """
  chex.assert_type(values, jnp.uint8)
  values = values.astype(jnp.int32)
  result = jnp.zeros([1 if i in axis else size for i, size in enumerate(values.shape)],
                     jnp.int32)
  for bit in range(7, -1, -1):
    trial = result + (1 << bit)
    below = jnp.sum(values < trial, axis=tuple(axis), keepdims=True)
    result = jnp.where(below < k, trial, result)
  return result


class ConvTorso(nn.Module):
  """The vision core's ConvNet (8x8/4 32ch, 4x4/2 64ch in the paper), ReLU.

  For the attention kinds it also applies the ConvLSTM's input convolution, which
  does not depend on the recurrent state (see ConvLSTMGates).
  """
  config: NetworkConfig

  @nn.compact
  def __call__(self, frames):
    dtype = self.config.compute_dtype
    x = frames.astype(dtype) / 255.0
    if self.config.subtract_background:  # the median over h x w, per frame and channel
      x = x - background_median(frames, dtype)
    for i, (channels, kernel, stride) in enumerate(
        zip(self.config.conv_channels, self.config.conv_kernels, self.config.conv_strides)):
      x = nn.Conv(channels, (kernel, kernel), (stride, stride), padding='SAME', dtype=dtype,
                  name=f'conv_{i}')(x)
      x = nn.relu(x)
    if self.config.kind in ATTENTION_KINDS:  # the ConvLSTM's input-to-gates convolution
      kernel = self.config.vision_lstm_kernel
      x = nn.Conv(4 * self.config.vision_lstm_channels, (kernel, kernel), padding='SAME',
                  dtype=dtype, name='vision_lstm_input')(x)
    return x


class ResNetTorso(nn.Module):
  """IMPALA deep ResNet (Espeholt et al. 2018, Fig. 3) ending in a dense layer."""
  config: NetworkConfig

  @nn.compact
  def __call__(self, frames):
    dtype = self.config.compute_dtype
    x = frames.astype(dtype) / 255.0
    for i, channels in enumerate(self.config.resnet_channels):
      x = nn.Conv(channels, (3, 3), padding='SAME', dtype=dtype, name=f'stage_{i}_conv')(x)
      x = nn.max_pool(x, (3, 3), strides=(2, 2), padding='SAME')
      for j in range(self.config.resnet_blocks):
        y = nn.Conv(channels, (3, 3), padding='SAME', dtype=dtype, name=f'stage_{i}_block_{j}_a')(nn.relu(x))
        y = nn.Conv(channels, (3, 3), padding='SAME', dtype=dtype, name=f'stage_{i}_block_{j}_b')(nn.relu(y))
        x = x + y
    x = nn.relu(x).reshape(x.shape[0], -1)
    return nn.relu(nn.Dense(self.config.resnet_hidden, dtype=dtype, name='output')(x))


class NatureTorso(nn.Module):
  """The DQN torso of Mnih et al. (2015): 32 8x8/4, 64 4x4/2, 64 3x3/1 ('VALID'), FC 512.

  The fast CPU baseline: about 20 MFLOP per 84x84 frame forward, 50x less than S3TA.
  """
  config: NetworkConfig

  @nn.compact
  def __call__(self, frames):
    cfg = self.config
    dtype = cfg.compute_dtype
    x = frames.astype(dtype) / 255.0
    for i, (channels, kernel, stride) in enumerate(
        zip(cfg.nature_channels, cfg.nature_kernels, cfg.nature_strides)):
      x = nn.relu(nn.Conv(channels, (kernel, kernel), (stride, stride), padding='VALID',
                          dtype=dtype, name=f'conv_{i}')(x))
    x = x.reshape(x.shape[0], -1)
    return nn.relu(nn.Dense(cfg.nature_hidden, dtype=dtype, name='output')(x))


class MLPTorso(nn.Module):
  """The feature baseline ('FC' of paper 002): bytes scaled to [0, 1], flattened, ReLU layers."""
  config: NetworkConfig

  @nn.compact
  def __call__(self, frames):
    dtype = self.config.compute_dtype
    x = (frames.astype(dtype) / 255.0).reshape(frames.shape[0], -1)
    for i, size in enumerate(self.config.mlp_hidden):
      x = nn.relu(nn.Dense(size, dtype=dtype, name=f'hidden_{i}')(x))
    return x


class S3TACore(nn.Module):
  """One time step of the S3TA agent after the ConvNet: ConvLSTM, attention, LSTM.

  `config.kind` selects the query source: 's3ta' (top-down queries from the
  previous LSTM state), 'fixed_query' (a learned bias, independent of the state)
  or 'l2_keys' (no queries: each location's logit is its key's L2 norm).
  """
  config: NetworkConfig
  num_actions: int
  basis: np.ndarray  # [h, w, basis_channels]

  @nn.compact
  def __call__(self, state: AgentState, step, attention_threshold):
    features, prev_action, prev_reward, is_first = step  # features: ConvLSTM input gates
    cfg = self.config
    dtype = cfg.compute_dtype
    batch = features.shape[0]
    state = _reset(state, is_first)

    vision_state, vision_out = ConvLSTMGates(cfg.vision_lstm_channels, cfg.vision_lstm_kernel,
                                             dtype, name='vision_lstm')(state.vision, features)
    vision_out = vision_out.astype(jnp.float32)
    basis = jnp.broadcast_to(self.basis, (batch,) + self.basis.shape)
    key_content = vision_out[..., :cfg.key_channels]
    if cfg.key_norm:
      key_content = nn.LayerNorm(name='key_norm')(key_content)
    keys = jnp.concatenate([key_content, basis], axis=-1)
    values = jnp.concatenate([vision_out[..., cfg.key_channels:], basis], axis=-1)

    query_shape = (cfg.num_heads, cfg.query_size)
    if cfg.kind == 's3ta':
      previous_hidden = state.core[1]
      if cfg.query_input_norm:
        previous_hidden = nn.LayerNorm(name='query_input_norm')(previous_hidden)
      hidden = _mlp(cfg.query_hidden, dtype, 'query')(previous_hidden.astype(dtype))
      init = nn.initializers.variance_scaling(cfg.query_init_scale**2, 'fan_in', 'truncated_normal')
      queries = nn.Dense(math.prod(query_shape), dtype=dtype, kernel_init=init,
                         name='query_out')(hidden)
      queries = queries.astype(jnp.float32).reshape((batch,) + query_shape)
      if cfg.query_norm:
        queries = nn.LayerNorm(name='query_norm')(queries)
    elif cfg.kind == 'fixed_query':
      bias = self.param('fixed_queries', nn.initializers.normal(stddev=cfg.query_init_scale),
                        query_shape)
      queries = jnp.broadcast_to(bias, (batch,) + query_shape)
    else:  # 'l2_keys': no queries; the same key-norm map for every head.
      queries = jnp.zeros((batch,) + query_shape, jnp.float32)

    if cfg.kind == 'l2_keys':
      norms = jnp.linalg.norm(key_content, axis=-1)  # [B, h, w]; key_norm is off for this kind
      logits = jnp.broadcast_to(norms[:, None], (batch, cfg.num_heads) + norms.shape[1:])
    else:
      logits = attention_lib.attention_logits(queries, keys)
    weights = attention_lib.hard_threshold(attention_lib.spatial_softmax(logits),
                                           attention_threshold)
    answers = attention_lib.read_answers(weights, values)

    parts = [answers.reshape(batch, -1)]
    if cfg.kind != 'l2_keys':
      parts.append(queries.reshape(batch, -1))
    parts.append(_previous_inputs(prev_action, prev_reward, self.num_actions, jnp.float32))
    x = _mlp(cfg.answer_hidden, dtype, 'answer')(jnp.concatenate(parts, axis=-1).astype(dtype))
    core_state, core_out = nn.OptimizedLSTMCell(cfg.lstm_size, name='policy_lstm')(state.core, x)
    logits, value = PolicyValueHead(self.num_actions, cfg.head_hidden, dtype, name='head')(core_out)
    return AgentState(vision_state, core_state), AgentOutput(logits, value, weights, queries)


class BaselineCore(nn.Module):
  """The baselines after their torso: feed-forward heads, or an LSTM (with the previous action
  and reward unless `lstm_previous_inputs` is off; `time_previous_inputs` adds them to the
  attention-over-time agent's heads)."""
  config: NetworkConfig
  num_actions: int

  @nn.compact
  def __call__(self, state: AgentState, step, attention_threshold):
    del attention_threshold  # no attention in the baselines
    features, prev_action, prev_reward, is_first = step
    previous = lambda x: jnp.concatenate(
        [x.astype(jnp.float32), _previous_inputs(prev_action, prev_reward, self.num_actions,
                                                 jnp.float32)], axis=-1)
    if self.config.kind in FEATURE_ATTENTION_KINDS:
      features, maps = features
      if self.config.kind == 'time_attention' and self.config.time_previous_inputs:
        features = previous(features)
      return state, AgentOutput(*PolicyValueHead(self.num_actions, name='head')(features), maps)
    if self.config.kind not in RECURRENT_BASELINES:
      return state, AgentOutput(*PolicyValueHead(self.num_actions, name='head')(features))
    state = _reset(state, is_first)
    x = previous(features) if self.config.lstm_previous_inputs else features.astype(jnp.float32)
    core_state, core_out = nn.OptimizedLSTMCell(self.config.lstm_size, name='policy_lstm')(state.core, x)
    return AgentState((), core_state), AgentOutput(*PolicyValueHead(self.num_actions, name='head')(core_out))


class AgentModule(nn.Module):
  """Unrolls the torso over [T*B] frames and scans the recurrent core over T."""
  config: NetworkConfig
  num_actions: int
  observation_shape: tuple[int, ...]

  @nn.compact
  def __call__(self, inputs: AgentInput, state: AgentState, attention_threshold=0.0):
    cfg = self.config
    time, batch = inputs.observation.shape[:2]
    chex.assert_shape(inputs.observation, (time, batch) + tuple(self.observation_shape))
    chex.assert_shape([inputs.prev_action, inputs.prev_reward, inputs.is_first], (time, batch))
    chex.assert_type([inputs.prev_action, inputs.prev_reward], [int, float])
    frames = inputs.observation.reshape((time * batch,) + inputs.observation.shape[2:])
    # remat: the backward pass recomputes each core step from its carry and inputs
    # instead of keeping every step's activations (gates, attention maps) for all T.
    wrap = nn.remat if cfg.remat else (lambda module: module)
    if cfg.kind in ATTENTION_KINDS:
      features = ConvTorso(cfg, name='torso')(frames)
      core_cls = nn.scan(wrap(S3TACore), variable_broadcast='params', split_rngs={'params': False},
                         in_axes=(0, nn.broadcast), out_axes=0, unroll=cfg.scan_unroll)
      core = core_cls(cfg, self.num_actions,
                      attention_lib.spatial_basis(*cfg.vision_shape(self.observation_shape),
                                                  cfg.basis_frequencies), name='core')
    else:
      torso = {'nature': NatureTorso, 'nature_lstm': NatureTorso, 'mlp': MLPTorso,
               'dawrl': awrl.AWRLTorso, 'gawrl': awrl.AWRLTorso,
               'cnn1d': feature_cnn.FeatureCNNTorso,
               'acnn': feature_cnn.FeatureCNNTorso,
               'time_attention': time_attention.TimeAttentionTorso}.get(cfg.kind, ResNetTorso)
      features = torso(cfg, name='torso')(frames)
      core_cls = nn.scan(wrap(BaselineCore), variable_broadcast='params', split_rngs={'params': False},
                         in_axes=(0, nn.broadcast), out_axes=0, unroll=cfg.scan_unroll)
      core = core_cls(cfg, self.num_actions, name='core')
    features = jax.tree_util.tree_map(lambda x: x.reshape((time, batch) + x.shape[1:]), features)
    steps = (features, inputs.prev_action, inputs.prev_reward, inputs.is_first)
    final_state, outputs = core(state, steps, jnp.asarray(attention_threshold, jnp.float32))
    return outputs, final_state


class Network:
  """A network plus its pure functions: `init`, `initial_state`, `unroll`, `step`.

  All functions are pure and jit-able; `unroll` takes time-major [T, B] inputs,
  `step` one [B] step (actors call it with T = 1 under the hood).
  """

  def __init__(self, config: NetworkConfig, num_actions: int, observation_shape: Sequence[int]):
    if num_actions < 1:
      raise ValueError(f'num_actions must be >= 1, got {num_actions}.')
    if len(observation_shape) != 3:
      raise ValueError(f'observation_shape must be [H, W, C], got {tuple(observation_shape)}.')
    self.config = config
    self.num_actions = num_actions
    self.observation_shape = tuple(int(d) for d in observation_shape)
    self.module = AgentModule(config, num_actions, self.observation_shape)

  @property
  def has_attention(self) -> bool:
    return self.config.kind in ATTENTION_KINDS

  def initial_state(self, batch_size: int) -> AgentState:
    """Zero recurrent state for `batch_size` environments."""
    cfg = self.config
    recurrent = cfg.kind in ATTENTION_KINDS or cfg.kind in RECURRENT_BASELINES
    core = (jnp.zeros((batch_size, cfg.lstm_size)),) * 2 if recurrent else ()
    if cfg.kind in ATTENTION_KINDS:
      h, w = cfg.vision_shape(self.observation_shape)
      vision = (jnp.zeros((batch_size, h, w, cfg.vision_lstm_channels)),) * 2
    else:
      vision = ()
    return AgentState(vision, core)

  def dummy_input(self, time: int = 1, batch: int = 1) -> AgentInput:
    return AgentInput(
        observation=jnp.zeros((time, batch) + self.observation_shape, jnp.uint8),
        prev_action=jnp.zeros((time, batch), jnp.int32),
        prev_reward=jnp.zeros((time, batch), jnp.float32),
        is_first=jnp.ones((time, batch), bool))

  def init(self, rng: jax.Array):
    """Fresh parameters."""
    return self.module.init(rng, self.dummy_input(), self.initial_state(1))['params']

  def unroll(self, params, inputs: AgentInput, state: AgentState, attention_threshold=0.0):
    """Runs [T, B] inputs from `state`; returns ([T, B] AgentOutput, final state)."""
    return self.module.apply({'params': params}, inputs, state, attention_threshold)

  def step(self, params, inputs: AgentInput, state: AgentState, attention_threshold=0.0):
    """One step on [B] inputs; returns ([B] AgentOutput, next state)."""
    batched = jax.tree_util.tree_map(lambda x: x[None], inputs)
    outputs, state = self.unroll(params, batched, state, attention_threshold)
    return jax.tree_util.tree_map(lambda x: x[0], outputs), state


def make_network(config: Any, num_actions: int, observation_shape: Sequence[int]) -> Network:
  """Builds a Network from a NetworkConfig, dict or ConfigDict."""
  if not isinstance(config, NetworkConfig):
    config = NetworkConfig.from_dict(config)
  return Network(config, num_actions, observation_shape)


def parameter_count(params) -> int:
  return int(sum(np.prod(p.shape) for p in jax.tree_util.tree_leaves(params)))


def parameter_counts(params) -> dict[str, int]:
  """Learnable parameters by sub-network, as paper 002 counts them (Tables 3-4).

  'policy' and 'value' are the output layers of the two heads (`head/policy`,
  `head/value`); 'inference' is everything before them (torso, core and the head's
  shared hidden layer).
  """
  counts = {'inference': 0, 'policy': 0, 'value': 0}
  for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
    modules = tuple(str(getattr(key, 'key', key)) for key in path[:-1])
    part = modules[-1] if modules[-2:] in (('head', 'policy'), ('head', 'value')) else 'inference'
    counts[part] += int(np.prod(leaf.shape))
  return counts
