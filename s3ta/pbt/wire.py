"""Encoding of learner state for courier calls.

With dm-launchpad 0.5.2 / numpy 1.26 here, a courier call whose *arguments* hold
numpy arrays never reaches the server (the client sees Deadline Exceeded; return
values with arrays are fine; measured 2026-11). So exploit sends the donor's
params + optimiser state as one bytes blob (pickle; 200 MB in ~2 s on localhost),
and hyperparameters as plain Python floats.
"""

import pickle
from typing import Any, Mapping

import jax
import numpy as np


def encode_state(state: Any) -> bytes:
  """Host (numpy) copy of a pytree, pickled."""
  return pickle.dumps(jax.tree_util.tree_map(np.asarray, state), protocol=pickle.HIGHEST_PROTOCOL)


def decode_state(blob: Any) -> Any:
  """Inverse of `encode_state`; non-bytes values pass through (in-process callers)."""
  if isinstance(blob, (bytes, bytearray)):
    return pickle.loads(blob)
  return blob


def plain_hyperparams(hyperparams: Mapping[str, float]) -> dict:
  return {str(k): float(v) for k, v in hyperparams.items()}
