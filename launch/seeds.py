"""Per-node randomness of a run, all derived from `config.seed`: PRNG keys and env seeds.

Shared by the distributed program (one key and env-seed range per actor), PBT and the
single-machine trainer; a restarted worker (attempt n > 0) gets a fresh stream.
"""

import jax
import numpy as np


def actor_keys(seed: int, num_actors: int) -> np.ndarray:
  """One PRNG key per actor (+ learner and evaluator keys at the end), as uint32 [N + 2, 2]."""
  return np.asarray(jax.random.split(jax.random.PRNGKey(seed), num_actors + 2))


def actor_env_seed(seed: int, actor_id: int, num_envs: int) -> int:
  """Env seeds never overlap between actors (EnvPool seeds env i with seed + i)."""
  return int(seed) * 1_000_003 % 2**30 + (actor_id + 1) * max(num_envs, 1) * 17


def restart_seed(seed: int, attempt: int) -> int:
  """The seed a restarted worker (attempt n > 0) derives its env seeds from: a fresh stream."""
  return int(seed) + 7_919 * int(attempt)


def restart_key(key: np.ndarray, attempt: int) -> np.ndarray:
  """A worker's PRNG key for `attempt` (unchanged for the first; folded in for restarts)."""
  if not attempt:
    return key
  return np.asarray(jax.random.fold_in(key, attempt))


def inference_key(seed: int, node_id: int) -> np.ndarray:
  """The action-sampling PRNG key of central inference node `node_id` (its own stream)."""
  return np.asarray(jax.random.fold_in(jax.random.PRNGKey(int(seed) + 104_729), node_id))
