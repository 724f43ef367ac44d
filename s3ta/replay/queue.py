"""The Reverb trajectory queue: its table, the actors' writer and the learner's dataset.

One Reverb item is one environment's unroll of T + 1 steps (the `Trajectory`
fields with a leading [T + 1] axis, no batch axis) plus:

- `initial_state`: the recurrent state the actor had before the item's first step;
- `param_version`: int32 [T + 1], the learner parameter version that chose each action
  (policy lag = learner version − min of these);
- `meta`: int32 [3] = (actor id, env index in the actor's batch, unroll index).

The actor appends each env's unroll as ONE writer step (columns already [T + 1]),
so a chunk is a whole unroll and compresses well (frames of one unroll are alike).
The table is a FIFO queue whose `Queue` rate limiter blocks inserts when full — the
bound on actor run-ahead — and `TrajectoryQueueWriter` makes that block reach the
actor (trap 3 in DESIGN.md: `create_item` never blocks by itself).

TensorFlow/Reverb are imported lazily so `item_spec` & co work without them.
"""

import functools
import gc
import queue as queue_lib
import threading
import time
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from s3ta.types import Trajectory

TABLE_NAME = 'trajectories'
ITEM_EXTRA_FIELDS = ('param_version', 'meta')
STEP_FIELDS = tuple(f for f in Trajectory._fields if f != 'initial_state')


def item_spec(network, unroll_length: int) -> dict:
  """(shape, dtype) per column of one item, for `network` and unroll length T."""
  steps = unroll_length + 1
  obs = tuple(network.observation_shape)
  spec = {
      'observation': ((steps,) + obs, np.uint8),
      'prev_action': ((steps,), np.int32),
      'prev_reward': ((steps,), np.float32),
      'is_first': ((steps,), np.bool_),
      'action': ((steps,), np.int32),
      'behaviour_logits': ((steps, network.num_actions), np.float32),
      'reward': ((steps,), np.float32),
      'discount': ((steps,), np.float32),
      'param_version': ((steps,), np.int32),
      'meta': ((3,), np.int32),
  }
  state = jax.eval_shape(lambda: network.initial_state(1))
  spec['initial_state'] = jax.tree_util.tree_map(lambda x: (tuple(x.shape[1:]), np.dtype(x.dtype)),
                                                 state)
  return spec


def _is_spec_leaf(x) -> bool:
  return isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], tuple) and not isinstance(
      x[1], tuple)


def tf_signature(network, unroll_length: int):
  """The table signature (tf.TensorSpec nest) of `item_spec`."""
  return signature_of_spec(item_spec(network, unroll_length))


def signature_of_spec(spec: dict):
  """The tf.TensorSpec nest of an `item_spec` (picklable, e.g. to build a table elsewhere)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (lazy, see the module docstring)
  return jax.tree_util.tree_map(lambda s: tf.TensorSpec(s[0], tf.as_dtype(s[1])), spec,
                                is_leaf=_is_spec_leaf)


def make_queue_table(size: int, signature=None, name: str = TABLE_NAME):
  """A FIFO table, each item sampled once, whose rate limiter blocks inserts when full."""
  import reverb  # pylint: disable=g-import-not-at-top  (lazy, see the module docstring)
  if size < 1:
    raise ValueError(f'queue size must be >= 1, got {size}.')
  return reverb.Table.queue(name=name, max_size=size, signature=signature)


def make_queue_tables_fn(network_fn: Callable[[], Any], unroll_length: int, size: int):
  """A picklable `priority_tables_fn` for `lp.ReverbNode` (builds the spec in the node)."""

  def tables_fn():
    return [make_queue_table(size, tf_signature(network_fn(), unroll_length))]

  return tables_fn


def split_trajectory(trajectory: Trajectory, param_versions: np.ndarray, actor_id: int,
                     unroll_index: int) -> list[dict]:
  """Splits a [T + 1, E] Trajectory into E per-env items (dicts of numpy arrays)."""
  num_envs = np.asarray(trajectory.action).shape[1]
  versions = np.asarray(param_versions, np.int32)
  items = []
  for e in range(num_envs):
    item = {k: np.asarray(getattr(trajectory, k))[:, e] for k in STEP_FIELDS}
    item['initial_state'] = jax.tree_util.tree_map(lambda x, e=e: np.asarray(x)[e],
                                                   trajectory.initial_state)
    item['param_version'] = versions
    item['meta'] = np.array([actor_id, e, unroll_index], np.int32)
    items.append(item)
  return items


class TrajectoryQueueWriter:
  """Writes per-env unroll items and blocks (with stop checks) while the queue is full.

  Args:
    client: a `reverb.Client`.
    max_in_flight_items: items allowed unconfirmed by the server before `write` blocks.
    should_stop: returns True when the program is stopping; checked between waits.
    timeout_ms: how long one flush attempt waits before checking `should_stop`.
  """

  def __init__(self, client, max_in_flight_items: int = 0, should_stop=lambda: False,
               timeout_ms: int = 500, table: str = TABLE_NAME):
    self._client = client
    self._writer = client.trajectory_writer(num_keep_alive_refs=1)
    self._max_in_flight = max_in_flight_items
    self._should_stop = should_stop
    self._timeout_ms = timeout_ms
    self._table = table
    self.items_written = 0

  def _wait(self, block_until: int) -> bool:
    """Flushes until at most `block_until` items are pending; False if stopped first."""
    import reverb  # pylint: disable=g-import-not-at-top  (lazy, see the module docstring)
    while True:
      try:
        self._writer.flush(block_until_num_items=block_until, timeout_ms=self._timeout_ms)
        return True
      except reverb.DeadlineExceededError:
        if self._should_stop():
          return False
      except Exception:  # pylint: disable=broad-except  (server gone: fine when stopping)
        if self._should_stop():
          return False
        raise

  def write(self, items: list[dict]) -> bool:
    """Inserts items (each one writer step); returns False if the program is stopping."""
    try:
      for item in items:
        self._writer.append(item)
        history = self._writer.history
        # Column histories are pytree leaves; [-1] references this step only (squeezed).
        trajectory = jax.tree_util.tree_map(lambda column: column[-1], history)
        self._writer.create_item(self._table, 1.0, trajectory)
        self.items_written += 1
    except Exception:  # pylint: disable=broad-except  (server gone: fine when stopping)
      if self._should_stop():
        return False
      raise
    return self._wait(self._max_in_flight)

  def close(self, flush: bool = False):
    """Closes the writer; pending items are flushed only if `flush` (may block)."""
    if flush:
      self._wait(0)
    self._writer.close()


def make_dataset(server_address: str, batch_size: int, *, max_in_flight_samples: int = 0,
                 timeout_ms: int = 1000, table: str = TABLE_NAME):
  """A tf.data dataset of [B]-batched items; ends after `timeout_ms` without data.

  The timeout lets the learner check its stop event (and survive dead actors)
  instead of blocking forever; recreate the iterator to continue. No tf.data prefetch:
  `BatchSampler`'s thread already fetches the next batch while the learner steps, and
  a second buffer would only pull batches earlier (more policy lag).
  """
  import reverb  # pylint: disable=g-import-not-at-top  (lazy, see the module docstring)
  dataset = reverb.TrajectoryDataset.from_table_signature(
      server_address, table,
      max_in_flight_samples_per_worker=max_in_flight_samples or 2 * batch_size,
      rate_limiter_timeout_ms=timeout_ms)
  return dataset.batch(batch_size, drop_remainder=True)


class BatchSampler:
  """[B]-batched samples from the queue that never block a learner for long.

  A daemon thread pulls batches from Reverb (reopening the dataset after a timeout or
  an error) and hands them over one at a time. `next()` returns a sample, or None when
  none came within the timeout or Reverb was unavailable, so the caller re-checks its
  stop condition and calls again. After `max_failures` Reverb errors in a row it
  raises, unless the program is stopping (the replay node may go down first).

  Why a thread: when the replay server stops while a sample is in flight (every node
  gets SIGTERM at once), Reverb's sampler can keep retrying the lost connection, and
  both `next(iterator)` and dropping the iterator then block for good. Blocked in C++,
  the learner's main thread would never run its SIGTERM handler nor save. Here only
  the fetch thread can block; `close()` says whether it finished.
  """

  def __init__(self, server_address: str, batch_size: int, *, timeout_ms: int,
               should_stop: Callable[[], bool], max_failures: int = 30, retry_s: float = 1.0,
               max_in_flight_samples: int = 0):
    self._open = functools.partial(make_dataset, server_address, batch_size, timeout_ms=timeout_ms,
                                   max_in_flight_samples=max_in_flight_samples)
    self._wait_s = timeout_ms / 1000 + 0.5  # the dataset's own timeout, plus slack
    self._should_stop, self._max_failures, self._retry_s = should_stop, max_failures, retry_s
    self._handover = queue_lib.Queue(maxsize=1)  # ('sample' | 'empty' | 'error', value)
    self._closing = threading.Event()
    self._thread: Optional[threading.Thread] = None
    self._failures = 0

  def _fetch(self) -> None:
    iterator, opened = None, False
    while not self._closing.is_set():
      try:
        if iterator is None:
          iterator = self._open().as_numpy_iterator()
          opened = True
        item = ('sample', next(iterator))
      except StopIteration:  # no data within the timeout: reopen
        iterator, item = None, ('empty', None)
      except Exception as e:  # pylint: disable=broad-except  (Reverb unavailable)
        iterator, item = None, ('error', e)
      while not self._closing.is_set():
        try:
          self._handover.put(item, timeout=0.1)
          break
        except queue_lib.Full:
          pass
      if item[0] == 'error':
        self._closing.wait(self._retry_s)
    del iterator  # a live Reverb/tf.data iterator makes a process hang at exit
    if opened:  # frees dropped iterators too; with none ever opened a full collection (0.2 s
      gc.collect()  # of CPU after the imports alone, more in a big process) only delays close()

  def next(self):
    if self._thread is None:
      self._thread = threading.Thread(target=self._fetch, name='reverb-sampler', daemon=True)
      self._thread.start()
    try:
      kind, value = self._handover.get(timeout=self._wait_s)
    except queue_lib.Empty:
      return None
    if kind == 'sample':
      self._failures = 0
      return value
    if kind == 'error' and not self._should_stop():
      self._failures += 1
      if self._failures > self._max_failures:
        raise value
    return None

  def close(self, timeout_s: float = 3.0) -> bool:
    """Stops the fetch thread (dropping its iterator); False if it did not end within `timeout_s`."""
    self._closing.set()
    if self._thread is None:
      return True
    self._thread.join(timeout_s)
    return not self._thread.is_alive()


def batch_to_trajectory(data: dict, state_treedef=None) -> tuple[Trajectory, dict]:
  """Batch-major sampled items [B, T + 1, ...] → (Trajectory as [B, T+1] arrays, extras).

  The swap to time-major is left to the jitted learner step (`time_major`), so
  it runs on the accelerator instead of copying frames on the host. Reverb
  rebuilds namedtuples from the table signature as look-alike classes; pass the
  treedef of `network.initial_state(1)` to get the real `AgentState` back.
  """
  fields = {k: data[k] for k in Trajectory._fields}
  if state_treedef is not None:
    fields['initial_state'] = jax.tree_util.tree_unflatten(
        state_treedef, jax.tree_util.tree_leaves(fields['initial_state']))
  trajectory = Trajectory(**fields)
  extras = {k: data[k] for k in ITEM_EXTRA_FIELDS}
  return trajectory, extras


def time_major(trajectory: Trajectory) -> Trajectory:
  """[B, T + 1, ...] step fields → [T + 1, B, ...]; `initial_state` stays [B, ...]."""
  fields = {k: jnp.swapaxes(getattr(trajectory, k), 0, 1) for k in STEP_FIELDS}
  return Trajectory(**fields, initial_state=trajectory.initial_state)


def wait_for_server(client, should_stop=lambda: False, timeout_s: float = 2.0,
                    deadline_s: Optional[float] = None) -> bool:
  """Waits until the Reverb server answers; False if stopped or past `deadline_s`."""
  start = time.time()
  while True:
    try:
      client.server_info(timeout=int(timeout_s))
      return True
    except Exception:  # pylint: disable=broad-except
      if should_stop() or (deadline_s is not None and time.time() - start > deadline_s):
        return False


def queue_size(client, table: str = TABLE_NAME, timeout_s: float = 1.0) -> int:
  """Items in the queue, or -1 if the server does not answer within `timeout_s` (+0.5 s).

  Asked from a daemon thread: a Reverb server that is shutting down can leave
  `server_info` blocked past its own timeout, and the caller (the learner) must never hang.
  """
  result = []

  def ask():
    try:
      result.append(int(client.server_info(timeout=int(timeout_s))[table].current_size))
    except Exception:  # pylint: disable=broad-except
      pass

  thread = threading.Thread(target=ask, daemon=True)
  thread.start()
  thread.join(timeout_s + 0.5)
  return result[0] if result else -1
