"""Central batched inference: merged calls give each actor what its own network step would,
its recurrent state stays on the server, retried calls are not stepped twice, and
actors retry an unreachable node (`s3ta/acting/inference.py`, `s3ta/acting/policy.py`)."""

import threading
import time

import jax
import numpy as np
import pytest

import s3ta  # noqa: F401
from experiments import catch
from s3ta.acting.actor import Actor
from s3ta.acting.inference import InferenceServer, merge_size
from s3ta.acting.policy import RemotePolicy, decode_arrays, encode_arrays
from s3ta.acting.unroll import UnrollAccumulator
from s3ta.envs.catch import BatchedCatch
from s3ta.networks import AgentInput, make_network

NUM_ENVS = 3
VERSION = 4


@pytest.fixture(scope='module')
def network_and_params():
  network = make_network(catch.get_config().network.to_dict(), BatchedCatch.num_actions,
                         BatchedCatch(1).observation_shape)
  return network, network.init(jax.random.PRNGKey(0))


class _Running:
  """An InferenceServer serving in a thread for the duration of a `with` block."""

  def __init__(self, network, params, **kwargs):
    self.stop = threading.Event()
    kwargs = dict(dict(max_requests=2, wait_ms=0.0), **kwargs)
    self.server = InferenceServer(network, lambda: (VERSION, params), rng_key=np.zeros(2, np.uint32),
                                  should_stop=self.stop.is_set, **kwargs)
    self.thread = threading.Thread(target=self.server.run, daemon=True)

  def __enter__(self):
    self.thread.start()
    return self.server

  def __exit__(self, *exc):
    self.stop.set()
    self.thread.join(timeout=10)
    assert not self.thread.is_alive()


def _inputs(rng, network, first):
  dummy = network.dummy_input().observation
  shape = (NUM_ENVS, *dummy.shape[2:])
  return dict(observation=(rng.uniform(size=shape) * 255).astype(dummy.dtype),
              prev_action=rng.integers(0, 3, NUM_ENVS).astype(np.int32),
              prev_reward=rng.normal(size=NUM_ENVS).astype(np.float32),
              is_first=np.full(NUM_ENVS, first))


def _request(inputs):
  return encode_arrays(inputs)


def test_merged_calls_match_each_actors_own_network_steps(network_and_params):
  network, params = network_and_params
  rng = np.random.default_rng(0)
  actors = (0, 1, 2)
  inputs = {a: [_inputs(rng, network, t == 0) for t in range(4)] for a in actors}
  replies = {a: [] for a in actors}
  with _Running(network, params, max_requests=3, wait_ms=5000.0) as server:
    for t in range(4):  # the actors call at once: one jitted call of 3 x 3 environments (the
      # call starts when the third arrives; the long window only keeps a slow thread in it)
      threads = [threading.Thread(target=lambda a=a: replies[a].append(
          server.step(a, t + 1, _request(inputs[a][t]), want_state=True))) for a in actors]
      for thread in threads:
        thread.start()
      for thread in threads:
        thread.join(timeout=60)
    assert server.total_requests == 12 and server.total_calls == 4
  assert server.call_sizes == {9}  # 3 requests of 3 environments in each call
  step = jax.jit(network.step)
  for a in actors:
    state = network.initial_state(NUM_ENVS)
    for t in range(4):
      reply = replies[a][t]
      assert reply['version'] == VERSION and reply['action'].shape == (NUM_ENVS,)
      expected_state = jax.tree_util.tree_leaves(state)
      for got, want in zip(reply['state'], expected_state):
        np.testing.assert_allclose(got, np.asarray(want), atol=1e-5)
      out, state = step(params, AgentInput(**inputs[a][t]), state)
      np.testing.assert_allclose(reply['logits'], np.asarray(out.logits), atol=1e-5)


def test_calls_serve_a_short_ladder_of_request_counts():
  assert [merge_size(n) for n in (1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 23, 24, 64, 95, 96)] == [
      1, 2, 3, 4, 4, 6, 6, 8, 8, 12, 16, 24, 64, 64, 96]
  sizes = [merge_size(n) for n in range(1, 4097)]
  assert all(n * 2 < size * 3 and size <= n for n, size in zip(range(1, 4097), sizes))
  assert len(set(sizes)) == 24  # 4,096 possible merges, 24 compiles: 1, 2, 3, 4, 6, ..., 4096
  with pytest.raises(ValueError, match='>= 1 request, got 0 waiting'):
    merge_size(0)


def test_requests_within_the_window_share_one_call(network_and_params):
  network, params = network_and_params
  rng = np.random.default_rng(1)
  records = []
  with _Running(network, params, max_requests=3, wait_ms=2000.0, logger=records.append,
                log_period_s=0.0) as server:
    threads = [threading.Thread(target=server.step, args=(a, 1, _request(_inputs(rng, network, True))))
               for a in range(3)]
    for thread in threads:
      thread.start()
    for thread in threads:
      thread.join(timeout=60)
  served = [r for r in records if r['requests_per_call'] > 0]
  assert served and served[0]['requests_per_call'] == 3.0 and served[0]['envs_per_call'] == 9.0


def test_requests_beyond_the_ladder_wait_for_the_next_call(network_and_params):
  """Five waiting requests: one call serves four (on the ladder), the next the fifth at once."""
  network, params = network_and_params
  rng = np.random.default_rng(6)
  replies = {}
  with _Running(network, params, max_requests=5, wait_ms=8000.0) as server:
    threads = [threading.Thread(target=lambda a=a: replies.update(
        {a: server.step(a, 1, _request(_inputs(rng, network, True)))})) for a in range(5)]
    start = time.monotonic()
    for thread in threads:
      thread.start()
    for thread in threads:
      thread.join(timeout=60)
    assert time.monotonic() - start < 6.0  # the fifth did not wait for a second window
    assert server.total_calls == 2 and server.total_requests == 5
  assert server.call_sizes == {4 * NUM_ENVS, NUM_ENVS}
  assert sorted(replies) == list(range(5)) and all(r['action'].shape == (NUM_ENVS,)
                                                   for r in replies.values())


def test_a_retried_call_is_answered_from_cache_and_reset_restarts_the_state(network_and_params):
  network, params = network_and_params
  rng = np.random.default_rng(2)
  first, second = _inputs(rng, network, True), _inputs(rng, network, False)
  second['is_first'][:] = False
  with _Running(network, params, max_requests=1) as server:
    a = server.step(0, 1, _request(first))
    b = server.step(0, 2, _request(second), want_state=True)
    again = server.step(0, 2, _request(second), want_state=True)  # a retry: same seq
    assert again is b
    c = server.step(0, 3, _request(second), want_state=True, reset=True)  # restarted actor
  # After `first`, the state is no longer the initial one; a reset brings it back.
  initial = jax.tree_util.tree_leaves(network.initial_state(NUM_ENVS))
  assert any(np.abs(np.asarray(x) - np.asarray(y)).max() > 1e-6 for x, y in zip(b['state'], initial))
  for got, want in zip(c['state'], initial):
    np.testing.assert_array_equal(got, np.asarray(want))
  assert a['action'].shape == (NUM_ENVS,)


def test_a_stopped_server_fails_calls_instead_of_hanging(network_and_params):
  network, params = network_and_params
  running = _Running(network, params, request_timeout_s=5.0)
  with running:
    pass
  with pytest.raises(RuntimeError, match='stopping'):
    running.server.step(0, 1, _request(_inputs(np.random.default_rng(3), network, True)))


def test_bad_server_settings_are_named(network_and_params):
  network, params = network_and_params
  with pytest.raises(ValueError, match='max_requests must be >= 1, got 0'):
    InferenceServer(network, lambda: (0, params), rng_key=np.zeros(2, np.uint32), max_requests=0,
                    wait_ms=1.0)
  with pytest.raises(ValueError, match='wait_ms must be >= 0, got -1'):
    InferenceServer(network, lambda: (0, params), rng_key=np.zeros(2, np.uint32), max_requests=1,
                    wait_ms=-1)


class _FlakyClient:
  """Fails `failures` calls, then forwards to `server` (a courier client's stand-in)."""

  def __init__(self, server, failures):
    self.server, self.failures, self.calls = server, failures, []

  def step(self, *args):
    self.calls.append(args[:2])
    if self.failures:
      self.failures -= 1
      raise TimeoutError('deadline exceeded')
    return self.server.step(*args)


def test_remote_policy_retries_with_the_same_sequence_number(network_and_params):
  network, params = network_and_params
  treedef = jax.tree_util.tree_structure(network.initial_state(1))
  with _Running(network, params, max_requests=1) as server:
    client = _FlakyClient(server, failures=2)
    policy = RemotePolicy(client, 5, treedef, retry_s=0.01)
    assert policy.start(NUM_ENVS)
    out = policy.step(AgentInput(**_inputs(np.random.default_rng(4), network, True)))
  assert out.version == VERSION and out.action.shape == (NUM_ENVS,)
  assert client.calls == [(5, 1)] * 3 and policy.stats() == {'inference_retries': 2}
  stopped = RemotePolicy(_FlakyClient(None, failures=10**6), 0, treedef, retry_s=0.01,
                         should_stop=lambda: True)
  assert stopped.step(AgentInput(**_inputs(np.random.default_rng(5), network, True))) is None


def test_actor_trajectories_from_central_inference_replay_exactly(network_and_params):
  """The initial state in each unroll (fetched from the server once per unroll) and the
  logits recorded at each step agree with an unroll of the network over the same inputs."""
  network, params = network_and_params
  treedef = jax.tree_util.tree_structure(network.initial_state(1))
  seen = []
  with _Running(network, params, max_requests=1) as server:
    actor = Actor(0, BatchedCatch(NUM_ENVS, seed=1), network, None, None, unroll_length=4,
                  rng_key=None, on_trajectory=lambda t, v: seen.append((t, v)),
                  policy=RemotePolicy(server, 0, treedef))
    actor.run(max_unrolls=3)
  assert len(seen) == 3 and actor.param_version == VERSION
  unroll = jax.jit(network.unroll)
  for trajectory, versions in seen:
    np.testing.assert_array_equal(versions, VERSION)
    inputs = AgentInput(trajectory.observation, trajectory.prev_action, trajectory.prev_reward,
                        trajectory.is_first)
    out, _ = unroll(params, inputs, trajectory.initial_state)
    np.testing.assert_allclose(trajectory.behaviour_logits, np.asarray(out.logits), atol=1e-5)


def test_arrays_cross_the_wire_as_dtype_shape_and_bytes():
  arrays = dict(o=np.arange(24, dtype=np.uint8).reshape(2, 3, 4), f=np.asarray([True, False]),
                r=np.asarray([1.5, -2.0], np.float32)[::-1])  # not contiguous
  encoded = encode_arrays(arrays)
  assert all(isinstance(v[2], bytes) for v in encoded.values())
  decoded = decode_arrays(encoded)
  for name, value in arrays.items():
    np.testing.assert_array_equal(decoded[name], value)
    assert decoded[name].dtype == value.dtype


def test_the_accumulator_needs_the_state_only_where_an_unroll_starts():
  acc = UnrollAccumulator(3)
  step = {f: np.zeros(1) for f in ('observation', 'prev_action', 'prev_reward', 'is_first',
                                   'action', 'behaviour_logits', 'reward', 'discount')}
  needed = []
  for t in range(7):
    needed.append(acc.needs_state)
    acc.add(step, np.full(1, t) if acc.needs_state else None)
  assert needed == [True, False, False, True, False, False, True]
  with pytest.raises(ValueError, match='state_before is needed'):
    UnrollAccumulator(3).add(step, None)
