"""Where an actor's policy runs: in the actor (`LocalPolicy`) or on a central node (`RemotePolicy`).

Both give the actor loop the same interface: `start(num_envs)`, then `step(inputs,
want_state) -> PolicyStep` once per batch step, and `refresh()` every few steps.
`LocalPolicy` runs the network jitted on the actor's CPU with parameters fetched from
the learner. `RemotePolicy` sends the inputs to an `InferenceServer`
(`s3ta/acting/inference.py`), which batches many actors into one call on the
learner host's accelerator and keeps their recurrent state; the state crosses the
wire only when the actor asks for it (once per unroll, for the Reverb item).
"""

import time
from typing import Any, Callable, NamedTuple, Optional

import jax
import numpy as np

from s3ta.acting.actor_core import make_select_action
from s3ta.networks import AgentInput


def encode_arrays(arrays: dict) -> dict:
  """{name: array} -> {name: (dtype str, shape list, bytes)}, courier-safe and pickle-free."""
  encoded = {}
  for name, value in arrays.items():
    value = np.ascontiguousarray(value)
    encoded[name] = (value.dtype.str, list(value.shape), value.tobytes())
  return encoded


def decode_arrays(encoded: dict) -> dict:
  """The inverse of `encode_arrays`."""
  return {name: np.frombuffer(data, np.dtype(dtype)).reshape(shape)
          for name, (dtype, shape, data) in encoded.items()}


class PolicyStep(NamedTuple):
  action: np.ndarray  # int32 [E]
  logits: np.ndarray  # float32 [E, A]
  version: int  # learner parameter version that chose the actions
  state_before: Any  # AgentState [E, ...] the network got, or None when not asked for


def wait_for_params(source: Callable[[], Optional[tuple[int, Any]]],
                    should_stop: Callable[[], bool], retry_s: float = 0.5):
  """Blocks until `source` answers; None if the program stops first."""
  while not should_stop():
    result = source()
    if result is not None:
      return result
    time.sleep(retry_s)
  return None


class LocalPolicy:
  """The network jitted on this process's CPU, parameters polled from `params_source`.

  Args:
    network: the agent `Network`.
    params_source: () -> (version, params) or None; with a non-blocking `poll()` it is
      used by `refresh` (see `s3ta.acting.actor.CourierParamsSource`).
    rng_key: this actor's PRNG key.
    should_stop: True when the program is stopping (ends the wait for first parameters).
  """

  def __init__(self, network, params_source, rng_key,
               should_stop: Callable[[], bool] = lambda: False):
    self._network = network
    self._params_source = params_source
    self._should_stop = should_stop
    self._cpu = jax.devices('cpu')[0]
    self._rng = jax.device_put(np.asarray(rng_key, np.uint32), self._cpu)
    self._select_action = make_select_action(network, device=self._cpu)
    self._params, self._state = None, None
    self.version = -1

  def _take(self, result) -> bool:
    if result is None:
      return False
    version, params = result
    if version != self.version:
      self.version, self._params = version, jax.device_put(params, self._cpu)
    return True

  def start(self, num_envs: int) -> bool:
    """Waits for the first parameters; False if the program stopped first."""
    if not self._take(wait_for_params(self._params_source, self._should_stop)):
      return False
    self._state = jax.device_put(self._network.initial_state(num_envs), self._cpu)
    return True

  def step(self, inputs: AgentInput, want_state: bool = True) -> PolicyStep:
    del want_state  # the state is here already: returning it costs nothing
    self._rng, key = jax.random.split(self._rng)
    out, next_state = self._select_action(self._params, key, inputs, self._state)
    state_before, self._state = self._state, next_state
    return PolicyStep(np.asarray(out.action), np.asarray(out.logits), self.version, state_before)

  def refresh(self) -> None:
    """Takes newer parameters if the source has them, without blocking when it can."""
    poll = getattr(self._params_source, 'poll', None)
    self._take(poll() if poll is not None else self._params_source())

  def stats(self) -> dict:
    return {}


class RemotePolicy:
  """Policy steps served by an `InferenceServer` over courier.

  Failed calls (timeouts, a restarting or unreachable node) are retried until the
  program stops, and counted; a retried call carries the same sequence number, so a
  step the server already took is answered from its cache, not taken twice.

  Args:
    client: courier client of the inference node (built with a `call_timeout`).
    actor_id: this actor's index: the key of its recurrent state on the server.
    state_treedef: tree structure of the network's `AgentState` (state comes back as leaves).
    should_stop: True when the program is stopping.
    retry_s: pause between retries.
    name: prefix of the console line printed when the node stops answering.
  """

  def __init__(self, client, actor_id: int, state_treedef, *,
               should_stop: Callable[[], bool] = lambda: False, retry_s: float = 1.0,
               name: str = 'actor'):
    self._client = client
    self._actor_id = actor_id
    self._treedef = state_treedef
    self._should_stop = should_stop
    self._retry_s = retry_s
    self._name = name
    self._seq = 0
    self._reset = True
    self.version = -1
    self.retries = 0

  def start(self, num_envs: int) -> bool:
    del num_envs  # the server sizes the state from the first request
    self._reset = True
    return True

  def step(self, inputs: AgentInput, want_state: bool = True) -> Optional[PolicyStep]:
    """The server's step for `inputs`; None if the program stopped while retrying."""
    request = encode_arrays(inputs._asdict())
    self._seq += 1
    failures = 0
    while not self._should_stop():
      try:
        reply = self._client.step(self._actor_id, self._seq, request, bool(want_state),
                                  self._reset)
      except Exception as e:  # pylint: disable=broad-except  (timeouts, node gone)
        failures += 1
        self.retries += 1
        if failures == 1:
          print(f'[{self._name}] inference node not answering ({type(e).__name__}: '
                f'{str(e)[:120]}); retrying every {self._retry_s:g} s', flush=True)
        time.sleep(self._retry_s)
        continue
      if failures:
        print(f'[{self._name}] inference node answering again after {failures} failed calls',
              flush=True)
      self._reset = False
      self.version = int(reply['version'])
      state = reply['state']
      state = None if state is None else jax.tree_util.tree_unflatten(self._treedef, state)
      return PolicyStep(np.asarray(reply['action']), np.asarray(reply['logits']), self.version,
                        state)
    return None

  def refresh(self) -> None:
    """Nothing to do: the server keeps its parameters current."""

  def stats(self) -> dict:
    return {'inference_retries': self.retries}
