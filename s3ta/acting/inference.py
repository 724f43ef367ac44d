"""Central batched inference (SEED RL's pattern): many actors' policy steps in one jitted call.

An `InferenceServer` runs on the learner's host and device. Actors call `step` over
courier (each call in its own courier thread); the calls wait in a queue, and the
serving loop takes up to `max_requests` of them, waiting at most `wait_ms` after the
first, and runs them as one jitted call: inputs concatenated, the network stepped,
outputs split back per actor. A call serves a number of requests from a short ladder
(1, 2, 3, 4, 6, 8, 12, ...: `merge_size`) and leaves the rest queued first for the next call,
so the network compiles a handful of times in a run rather than once per number of merged
requests (up to `max_requests` compiles, each 0.5-1.3 s on a CPU, which stalled a load of 16
or more actors for its first tens of seconds), and no call computes padding. The recurrent
state of every actor's environments stays on the device between calls (keyed by actor id);
it is sent back only when an actor asks (once per unroll, for its Reverb item), so the wire
carries observations in and actions and logits out. Parameters come from the learner by
version-checked fetches (`CourierParamsSource.poll`: unchanged parameters are not resent).

Launchpad's `lp.batched_handler` also batches courier calls (in C++), but it stacks each
argument into fixed-size arrays and leaves the per-actor state to the handler; this queue
does the gather and split with the state on the device, and is testable without courier.
Requests carry their arrays as (dtype, shape, bytes) triples (`policy.encode_arrays`): with
the pinned courier, a call whose arguments hold NumPy arrays never reaches the server
(it ends in 'Deadline Exceeded'), while bytes, lists and NumPy return values travel fine.
"""

import dataclasses
import functools
import os
import queue
import threading
import time
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from s3ta.acting.actor_core import make_select_action
from s3ta.acting.policy import decode_arrays, wait_for_params
from s3ta.networks import AgentInput


@dataclasses.dataclass
class _Request:
  actor_id: int
  seq: int
  inputs: AgentInput  # numpy [E, ...]
  want_state: bool
  reset: bool
  done: threading.Event = dataclasses.field(default_factory=threading.Event)
  reply: Optional[dict] = None
  error: Optional[str] = None


def merge_size(waiting: int) -> int:
  """How many of `waiting` requests one call serves: the largest of 1, 2, 3, 4, 6, 8, 12, 16,
  24, ... (2^k and 3 * 2^k) that is <= `waiting`. With the actors' equal environment counts the
  network compiles once per size on this ladder (about 2 log2 of the largest merge), and at
  least two thirds of the waiting requests are served at once."""
  if waiting < 1:
    raise ValueError(f'a call serves >= 1 request, got {waiting!r} waiting.')
  size = 1
  while True:  # 1 -> 2 -> 3 -> 4 -> 6 -> 8 -> 12 -> 16 -> ...
    bigger = 2 if size == 1 else size * 3 // 2 if size & (size - 1) == 0 else size * 4 // 3
    if bigger > waiting:
      return size
    size = bigger


@jax.jit
def _concat_rows(trees: list) -> Any:
  """Pytrees [E_i, ...] stacked along the batch: one small compile per number of trees."""
  return jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs, axis=0), *trees)


@functools.partial(jax.jit, static_argnums=1)
def _split_rows(tree: Any, bounds: tuple) -> list:
  """`tree` [R, ...] cut at `bounds` into one pytree per request: one small compile per cut."""
  edges = (0, *bounds)
  return [jax.tree_util.tree_map(lambda x, a=a, b=b: x[a:b], tree)
          for a, b in zip(edges[:-1], edges[1:])]


def _concat_inputs(inputs_list: list[AgentInput]) -> AgentInput:
  """The requests' inputs as one batch, concatenated on the host: one transfer per call."""
  return AgentInput(*(np.concatenate(fields, axis=0) for fields in zip(*inputs_list)))


class InferenceServer:
  """Serves batched policy steps to actors. `step` is the RPC; `run()` the serving loop.

  Args:
    network: the agent `Network`.
    params_source: the learner's parameters (`CourierParamsSource`, or any
      () -> (version, params) callable in tests).
    rng_key: PRNG key of this node's action sampling.
    max_requests: most actor requests merged into one call (>= 1).
    wait_ms: how long the loop waits for more requests after the first one.
    should_stop: True when the program is stopping.
    logger: callable(dict) for metrics records, or None.
    log_period_s: seconds between metrics records.
    param_poll_s: seconds between parameter polls.
    request_timeout_s: an RPC that waits longer than this raises (the actor retries).
    device: where parameters, state and the call live (default: JAX's first device,
      the accelerator when there is one).
  """

  def __init__(self, network, params_source, *, rng_key, max_requests: int, wait_ms: float,
               should_stop: Callable[[], bool] = lambda: False,
               logger: Optional[Callable[[dict], None]] = None, log_period_s: float = 10.0,
               param_poll_s: float = 0.05, request_timeout_s: float = 30.0, device=None):
    if max_requests < 1:
      raise ValueError(f'max_requests must be >= 1, got {max_requests!r}.')
    if wait_ms < 0:
      raise ValueError(f'wait_ms must be >= 0, got {wait_ms!r}.')
    self._network = network
    self._params_source = params_source
    self._max_requests = max_requests
    self._wait_s = wait_ms / 1000.0
    self._should_stop = should_stop
    self._logger = logger
    self._log_period_s = log_period_s
    self._param_poll_s = param_poll_s
    self._request_timeout_s = request_timeout_s
    self.device = device or jax.devices()[0]
    self._rng = jax.device_put(np.asarray(rng_key, np.uint32), self.device)
    self._policy = make_select_action(network)  # jitted: one compile per batch size served
    self.call_sizes: set[int] = set()  # the batch sizes served (environments per call)
    self._carried: list[_Request] = []  # gathered but left for the next call (`merge_size`)
    self._requests: queue.Queue = queue.Queue()
    self._states: dict[int, Any] = {}  # actor id -> AgentState [E, ...] on the device
    self._replies: dict[int, tuple[int, dict]] = {}  # actor id -> (seq, reply): retried calls
    self._replies_lock = threading.Lock()
    self._params, self.version = None, -1
    self._stopped = threading.Event()
    self._window = dict(calls=0, requests=0, envs=0, wait_s=0.0, infer_s=0.0)
    self.total_requests = self.total_calls = 0

  # ---------------------------------------------------------------- RPC
  def step(self, actor_id: int, seq: int, inputs: dict, want_state: bool = False,
           reset: bool = False) -> dict:
    """One policy step for an actor's E environments.

    Args:
      actor_id: the caller (its recurrent state's key).
      seq: the caller's step number; a repeated `seq` (a retried call) gets the reply
        already computed for it instead of a second step.
      inputs: AgentInput fields [E, ...], as `encode_arrays` packs them.
      want_state: also return the state the network got (its leaves, numpy).
      reset: start this actor's state afresh (a new or restarted actor).
    Returns:
      {'action' [E], 'logits' [E, A], 'version', 'state' (leaves or None)}.
    """
    with self._replies_lock:
      cached = self._replies.get(actor_id)
    if cached is not None and cached[0] == seq:
      return cached[1]
    if self._stopped.is_set():
      raise RuntimeError('the inference node is stopping')
    request = _Request(int(actor_id), int(seq), AgentInput(**decode_arrays(inputs)), bool(want_state), bool(reset))
    self._requests.put(request)
    if not request.done.wait(self._request_timeout_s):
      raise TimeoutError(f'no policy step within {self._request_timeout_s:g} s '
                         f'(queue {self._requests.qsize()} requests)')
    if request.error is not None:
      raise RuntimeError(request.error)
    with self._replies_lock:
      self._replies[actor_id] = (seq, request.reply)
    return request.reply

  # ---------------------------------------------------------------- serving loop
  def _take_params(self, result) -> None:
    if result is not None and result[0] != self.version:
      self.version, self._params = int(result[0]), jax.device_put(result[1], self.device)

  def _gather(self) -> list[_Request]:
    """The next call's requests: those the last call left (no window: they have waited a
    call), else the first to come (up to 0.1 s) and more within the window; of these, as many
    as `merge_size` allows when all have the same environment count, the rest kept."""
    requests, self._carried = self._carried, []
    window = 0.0 if requests else self._wait_s
    if not requests:
      try:
        requests = [self._requests.get(timeout=0.1)]
      except queue.Empty:
        return []
    deadline = time.monotonic() + window
    while len(requests) < self._max_requests:
      try:
        requests.append(self._requests.get_nowait())
        continue
      except queue.Empty:
        pass
      remaining = deadline - time.monotonic()
      if remaining <= 0:
        break
      try:
        requests.append(self._requests.get(timeout=remaining))
      except queue.Empty:
        break
    if len({r.inputs.is_first.shape[0] for r in requests}) == 1:  # the program's actors: always
      served = merge_size(len(requests))
      requests, self._carried = requests[:served], requests[served:]
    return requests

  def serve(self, requests: list[_Request]) -> None:
    """Runs `requests` as one jitted call and answers each."""
    start = time.monotonic()
    unique: dict[tuple[int, int], _Request] = {}  # a retried call queued twice is served once
    for r in requests:
      unique.setdefault((r.actor_id, r.seq), r)
    duplicates = [r for r in requests if unique[(r.actor_id, r.seq)] is not r]
    requests = list(unique.values())
    states = []
    for r in requests:
      num_envs = r.inputs.is_first.shape[0]
      state = self._states.get(r.actor_id)
      leaves = [] if state is None else jax.tree_util.tree_leaves(state)
      if r.reset or state is None or (leaves and leaves[0].shape[0] != num_envs):
        state = jax.device_put(self._network.initial_state(num_envs), self.device)
      states.append(state)
    self._rng, key = jax.random.split(self._rng)
    bounds = tuple(np.cumsum([r.inputs.is_first.shape[0] for r in requests]).tolist())
    inputs = jax.device_put(_concat_inputs([r.inputs for r in requests]), self.device)
    out, next_state = self._policy(self._params, key, inputs, _concat_rows(states))
    self.call_sizes.add(bounds[-1])
    next_states = _split_rows(next_state, bounds)
    action, logits = jax.device_get((out.action, out.logits))
    wanted = jax.device_get([s if r.want_state else None for r, s in zip(requests, states)])
    for r, a, b, next_state, state in zip(requests, (0, *bounds), bounds, next_states, wanted):
      self._states[r.actor_id] = next_state
      r.reply = {'action': action[a:b], 'logits': logits[a:b], 'version': self.version,
                 'state': None if state is None else jax.tree_util.tree_leaves(state)}
      r.done.set()
    for r in duplicates:
      r.reply = unique[(r.actor_id, r.seq)].reply
      r.done.set()
    w = self._window
    w['calls'] += 1
    w['requests'] += len(requests)
    w['envs'] += bounds[-1]
    w['infer_s'] += time.monotonic() - start
    self.total_requests += len(requests)
    self.total_calls += 1

  def run(self) -> None:
    """Serves until stopped: waits for parameters, then gathers, serves and polls."""
    first = wait_for_params(self._params_source, self._should_stop)
    if first is None:
      self._stop()
      return
    self._take_params(first)
    poll = getattr(self._params_source, 'poll', self._params_source)
    last_poll = last_log = start = time.monotonic()
    print(f'[inference] serving on {self.device}: up to {self._max_requests} requests per call, '
          f'window {1000 * self._wait_s:g} ms', flush=True)
    while not self._should_stop():
      t0 = time.monotonic()
      requests = self._gather()
      if requests:
        self._window['wait_s'] += time.monotonic() - t0
        try:
          self.serve(requests)
        except Exception as e:  # pylint: disable=broad-except  (answer the callers, then fail)
          for r in requests + self._carried:
            r.error = f'inference failed: {type(e).__name__}: {e}'
            r.done.set()
          raise
      now = time.monotonic()
      if now - last_poll >= self._param_poll_s:
        self._take_params(poll())
        last_poll = now
      if now - last_log >= self._log_period_s:
        self._log(now - last_log, now - start)
        last_log = now
    self._log(max(time.monotonic() - last_log, 1e-6), time.monotonic() - start, final=True)
    self._stop()

  def _stop(self) -> None:
    self._stopped.set()
    for r in self._carried:
      r.error = 'the inference node is stopping'
      r.done.set()
    while True:
      try:
        r = self._requests.get_nowait()
      except queue.Empty:
        return
      r.error = 'the inference node is stopping'
      r.done.set()

  def _log(self, span: float, elapsed: float, **extra) -> None:
    w, self._window = self._window, dict.fromkeys(self._window, 0)
    if self._logger is None:
      return
    calls = max(w['calls'], 1)
    self._logger(dict(
        requests=self.total_requests, param_version=self.version, elapsed_s=elapsed,
        pid=os.getpid(),
        calls_per_s=w['calls'] / span, requests_per_s=w['requests'] / span,
        envs_per_s=w['envs'] / span, requests_per_call=w['requests'] / calls,
        envs_per_call=w['envs'] / calls, infer_ms_per_call=1000 * w['infer_s'] / calls,
        busy_frac=w['infer_s'] / span, **extra))
