"""Central batched inference (SEED RL's pattern): many actors' policy steps in one jitted call.

An `InferenceServer` runs on the learner's host and device. Actors call `step` over
courier (each call in its own courier thread); the calls wait in a queue, and the
serving loop takes up to `max_requests` of them, waiting at most `wait_ms` after the
first, and runs them as one jitted call: inputs concatenated, the network stepped,
outputs split back per actor. The recurrent state of every actor's environments stays
on the device between calls (keyed by actor id); it is sent back only when an actor
asks (once per unroll, for its Reverb item), so the wire carries observations in and
actions and logits out. Parameters come from the learner by version-checked fetches
(`CourierParamsSource.poll`: unchanged parameters are not resent).

Launchpad's `lp.batched_handler` also batches courier calls (in C++), but it stacks each
argument into fixed-size arrays and leaves the per-actor state to the handler; this queue
does the gather and split with the state on the device, and is testable without courier.
Requests carry their arrays as (dtype, shape, bytes) triples (`policy.encode_arrays`): with
the pinned courier, a call whose arguments hold NumPy arrays never reaches the server
(it ends in 'Deadline Exceeded'), while bytes, lists and NumPy return values travel fine.
"""

import dataclasses
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


def make_batched_step(network) -> Callable:
  """`step(params, key, [inputs_i], [state_i]) -> ([(action_i, logits_i)], [next_state_i])`,
  jitted: the requests' environments concatenated into one batch, split back after.
  Compiles once per number of merged requests (the split points come from shapes)."""
  select_action = make_select_action(network, jit=False)

  def step(params, key, inputs_list, states_list):
    concat = lambda *xs: jnp.concatenate(xs, axis=0)
    inputs = jax.tree_util.tree_map(concat, *inputs_list)
    state = jax.tree_util.tree_map(concat, *states_list)
    out, next_state = select_action(params, key, inputs, state)
    bounds = np.cumsum([x.is_first.shape[0] for x in inputs_list])[:-1].tolist()
    split = lambda x: jnp.split(x, bounds, axis=0)
    leaves, treedef = jax.tree_util.tree_flatten(next_state)
    leaf_parts = [split(leaf) for leaf in leaves]
    states = [treedef.unflatten([parts[i] for parts in leaf_parts])
              for i in range(len(inputs_list))]
    return list(zip(split(out.action), split(out.logits))), states

  return jax.jit(step)


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
    self._step = make_batched_step(network)
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
    """The next requests: the first one (waits up to 0.1 s), then more within the window."""
    try:
      requests = [self._requests.get(timeout=0.1)]
    except queue.Empty:
      return []
    deadline = time.monotonic() + self._wait_s
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
    outputs, next_states = self._step(self._params, key, [r.inputs for r in requests], states)
    outputs = jax.device_get(outputs)
    wanted = jax.device_get([s if r.want_state else None for r, s in zip(requests, states)])
    for r, (action, logits), next_state, state in zip(requests, outputs, next_states, wanted):
      self._states[r.actor_id] = next_state
      r.reply = {'action': action, 'logits': logits, 'version': self.version,
                 'state': None if state is None else jax.tree_util.tree_leaves(state)}
      r.done.set()
    for r in duplicates:
      r.reply = unique[(r.actor_id, r.seq)].reply
      r.done.set()
    w = self._window
    w['calls'] += 1
    w['requests'] += len(requests)
    w['envs'] += sum(r.inputs.is_first.shape[0] for r in requests)
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
          for r in requests:
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
