"""The S3TA attention read-out: Fourier spatial basis and spatial soft attention.

Paper 000, §2 (eq. 3-5) and §2.1 (eq. 7). Pure functions; no parameters.
"""

import jax
import jax.numpy as jnp
import numpy as np


def spatial_basis(height: int, width: int, num_frequencies: int = 4) -> np.ndarray:
  """Fixed Fourier basis S[i, j, (u, v)] that encodes each location (i, j).

  Along each axis there are `2 * num_frequencies` 1-D basis vectors: the even
  cos(pi * u * i / h) and the odd sin(pi * u * i / h) for u = 1..num_frequencies.
  Every channel is the outer product of one height vector with one width vector
  (eq. 7), giving `(2 * num_frequencies) ** 2` channels (64 with the paper's 4).

  Returns:
    float32 array [height, width, (2 * num_frequencies) ** 2].
  """
  if height < 1 or width < 1:
    raise ValueError(f'spatial_basis needs height, width >= 1, got {height}x{width}.')
  if num_frequencies < 1:
    raise ValueError(f'num_frequencies must be >= 1, got {num_frequencies}.')

  def axis_basis(length: int) -> np.ndarray:
    freqs = np.arange(1, num_frequencies + 1, dtype=np.float64)
    phase = np.pi * np.arange(length, dtype=np.float64)[:, None] * freqs[None, :] / length
    return np.concatenate([np.cos(phase), np.sin(phase)], axis=-1)  # [length, 2F]

  rows, cols = axis_basis(height), axis_basis(width)
  basis = rows[:, None, :, None] * cols[None, :, None, :]  # [h, w, 2F, 2F]
  return basis.reshape(height, width, -1).astype(np.float32)


def attention_logits(queries: jax.Array, keys: jax.Array) -> jax.Array:
  """Eq. 3: inner product of each query with the key at every location.

  Args:
    queries: [B, N, C_k].
    keys: [B, h, w, C_k].
  Returns:
    [B, N, h, w] attention logits.
  """
  return jnp.einsum('bnc,bhwc->bnhw', queries, keys)


def spatial_softmax(logits: jax.Array) -> jax.Array:
  """Eq. 4: softmax over all h*w positions of a [B, N, h, w] logits map."""
  batch, heads, height, width = logits.shape
  flat = jax.nn.softmax(logits.reshape(batch, heads, height * width), axis=-1)
  return flat.reshape(batch, heads, height, width)


def hard_threshold(weights: jax.Array, threshold: jax.Array | float) -> jax.Array:
  """Eq. 12-13: zero weights below `threshold * max` and renormalise per head.

  threshold = 0 returns the soft weights bit for bit; threshold = 1 keeps only the
  arg-max location(s).
  """
  peak = jnp.max(weights, axis=(-2, -1), keepdims=True)
  kept = jnp.where(weights >= threshold * peak, weights, 0.0)
  return jnp.where(threshold > 0, kept / jnp.sum(kept, axis=(-2, -1), keepdims=True), weights)


def read_answers(weights: jax.Array, values: jax.Array) -> jax.Array:
  """Eq. 5: attention-weighted spatial sum of the values, [B, N, C_v]."""
  return jnp.einsum('bnhw,bhwc->bnc', weights, values)


def spatial_attention(queries: jax.Array, keys: jax.Array,
                      values: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Soft spatial attention (eq. 3-5).

  Args:
    queries: [B, N, C_k], one query per head.
    keys: [B, h, w, C_k], already including the spatial-basis channels.
    values: [B, h, w, C_v], already including the spatial-basis channels.
  Returns:
    answers [B, N, C_v] and attention weights [B, N, h, w] (each head's weights
    sum to one over the h*w positions).
  """
  weights = spatial_softmax(attention_logits(queries, keys))
  return read_answers(weights, values), weights
