"""The Reverb trajectory queue: blocking (not dropping) when full, and item round trips."""

import threading
import time
import types

import jax
import numpy as np
import pytest

import s3ta  # noqa: F401
from s3ta.types import Trajectory
from s3ta.networks import AgentState, make_network
from s3ta.replay import queue as replay

reverb = pytest.importorskip('reverb')

T = 3
NETWORK = dict(kind='s3ta', conv_channels=(4,), conv_kernels=(3,), conv_strides=(2,),
               vision_lstm_channels=8, key_channels=2, num_heads=1, basis_frequencies=1,
               query_hidden=(8,), answer_hidden=(8,), lstm_size=8, head_hidden=8)


def _network():
  return make_network(NETWORK, 3, (8, 6, 1))


def _trajectory(network, num_envs, value):
  steps = T + 1
  state = jax.tree_util.tree_map(lambda x: np.full(x.shape, value, np.float32),
                                 network.initial_state(num_envs))
  return Trajectory(
      observation=np.full((steps, num_envs, 8, 6, 1), value, np.uint8),
      prev_action=np.zeros((steps, num_envs), np.int32),
      prev_reward=np.zeros((steps, num_envs), np.float32),
      is_first=np.zeros((steps, num_envs), bool),
      action=np.full((steps, num_envs), value % 3, np.int32),
      behaviour_logits=np.zeros((steps, num_envs, 3), np.float32),
      reward=np.zeros((steps, num_envs), np.float32),
      discount=np.ones((steps, num_envs), np.float32),
      initial_state=state)


@pytest.fixture
def server():
  network = _network()
  srv = reverb.Server(replay.make_queue_tables_fn(lambda: network, T, 4)(), port=None)
  yield srv, network
  srv.stop()


def test_rate_limiter_blocks_rather_than_drops(server):
  srv, network = server
  client = reverb.Client(f'localhost:{srv.port}')
  stop = threading.Event()
  writer = replay.TrajectoryQueueWriter(client, 0, should_stop=stop.is_set, timeout_ms=100)
  for i in range(4):  # fills the queue (size 4) exactly
    assert writer.write(replay.split_trajectory(_trajectory(network, 1, i), np.zeros(T + 1), 0, i))
  assert client.server_info()[replay.TABLE_NAME].current_size == 4

  done = []
  thread = threading.Thread(target=lambda: done.append(writer.write(replay.split_trajectory(
      _trajectory(network, 1, 4), np.zeros(T + 1), 0, 4))))
  thread.start()
  thread.join(1.5)
  assert thread.is_alive(), 'write into a full queue must block'
  assert client.server_info()[replay.TABLE_NAME].current_size == 4

  # Consuming one item lets the blocked write through; nothing is dropped, FIFO order kept.
  dataset = replay.make_dataset(f'localhost:{srv.port}', 1, timeout_ms=1000)
  seen = []
  for sample in dataset.as_numpy_iterator():
    seen.append(int(sample.data['meta'][0, 2]))
  thread.join(5)
  assert done == [True]
  assert seen == [0, 1, 2, 3, 4]
  del dataset

  # A writer blocked on a full queue returns False once the program stops.
  for i in range(4):
    writer.write(replay.split_trajectory(_trajectory(network, 1, i), np.zeros(T + 1), 0, 10 + i))
  result = []
  thread = threading.Thread(target=lambda: result.append(writer.write(replay.split_trajectory(
      _trajectory(network, 1, 9), np.zeros(T + 1), 0, 20))))
  thread.start()
  time.sleep(0.5)
  stop.set()
  thread.join(5)
  assert result == [False]


def test_items_round_trip_to_a_time_major_batch(server):
  srv, network = server
  client = reverb.Client(f'localhost:{srv.port}')
  writer = replay.TrajectoryQueueWriter(client, 0)
  trajectory = _trajectory(network, 2, 5)
  items = replay.split_trajectory(trajectory, np.arange(T + 1), actor_id=3, unroll_index=7)
  assert [item['meta'].tolist() for item in items] == [[3, 0, 7], [3, 1, 7]]
  assert writer.write(items)
  dataset = replay.make_dataset(f'localhost:{srv.port}', 2, timeout_ms=500)
  sample = next(dataset.as_numpy_iterator())
  del dataset
  treedef = jax.tree_util.tree_structure(network.initial_state(1))
  batch, extras = replay.batch_to_trajectory(sample.data, treedef)
  assert isinstance(batch.initial_state, AgentState)
  assert batch.observation.shape == (2, T + 1, 8, 6, 1)
  time_major = replay.time_major(batch)
  np.testing.assert_array_equal(time_major.observation, trajectory.observation)
  np.testing.assert_array_equal(time_major.action, trajectory.action)
  for got, want in zip(jax.tree_util.tree_leaves(time_major.initial_state),
                       jax.tree_util.tree_leaves(trajectory.initial_state)):
    np.testing.assert_array_equal(got, want)
  np.testing.assert_array_equal(extras['param_version'], np.stack([np.arange(T + 1)] * 2))


def test_item_spec_shapes():
  network = _network()
  spec = replay.item_spec(network, T)
  assert spec['observation'] == ((T + 1, 8, 6, 1), np.uint8)
  assert spec['behaviour_logits'] == ((T + 1, 3), np.float32)
  assert spec['meta'] == ((3,), np.int32)
  with pytest.raises(ValueError, match='queue size'):
    replay.make_queue_table(0)


def test_queue_size_answers_or_gives_up_without_hanging():
  class Client:
    def __init__(self, block):
      self.block = block

    def server_info(self, timeout):
      if self.block:
        time.sleep(60)  # a server shutting down: blocked past its timeout
      return {replay.TABLE_NAME: types.SimpleNamespace(current_size=7)}

  assert replay.queue_size(Client(block=False)) == 7
  start = time.time()
  assert replay.queue_size(Client(block=True), timeout_s=0.2) == -1
  assert time.time() - start < 2.0


def test_sampler_never_blocks_its_caller_when_reverb_hangs(monkeypatch):
  """Every node gets SIGTERM at once: when the replay server stops while a sample is in
  flight, Reverb can block `next(iterator)` and the iterator's drop for good (seen in the
  distributed SIGTERM test: the learner never ran its handler nor saved). The caller gets
  None within the dataset's timeout, and `close` returns within its own and says so.
  Stand-in iterators play Reverb's: one hangs in its next batch, one in its drop."""
  released = threading.Event()

  class HangsInNext:
    def __init__(self):
      self.calls = 0

    def __next__(self):
      self.calls += 1
      if self.calls > 1:
        released.wait(30)
      return 'sample'

  class HangsInDrop:
    def __next__(self):
      return 'sample'

    def __del__(self):
      released.wait(30)

  for iterator_cls in (HangsInNext, HangsInDrop):
    dataset = types.SimpleNamespace(as_numpy_iterator=iterator_cls)
    monkeypatch.setattr(replay, 'make_dataset', lambda *args, ds=dataset, **kwargs: ds)
    sampler = replay.BatchSampler('localhost:1', 2, timeout_ms=200, should_stop=lambda: False)
    assert sampler.next() == 'sample'
    start = time.time()
    if iterator_cls is HangsInNext:
      assert sampler.next() is None  # after the 0.2 s timeout + 0.5 s slack, not never
      assert 0.6 < time.time() - start < 3.0
      start = time.time()
    assert sampler.close(timeout_s=0.5) is False
    assert 0.4 < time.time() - start < 3.0
  released.set()


def test_sampler_raises_after_repeated_errors_unless_stopping(monkeypatch):
  def unavailable(*args, **kwargs):
    raise ConnectionError('replay server unavailable')

  monkeypatch.setattr(replay, 'make_dataset', unavailable)
  stopping = threading.Event()
  # Each error reaches next() within milliseconds; the long wait keeps a loaded machine from
  # turning a call into a timeout (None, no error consumed), which shifts the count by one.
  sampler = replay.BatchSampler('localhost:1', 2, timeout_ms=5000, should_stop=stopping.is_set,
                                max_failures=2, retry_s=0.01)
  assert sampler.next() is None and sampler.next() is None  # failures 1 and 2: retried
  with pytest.raises(ConnectionError, match='unavailable'):
    sampler.next()
  stopping.set()  # a stopping program: the replay node may be gone first
  assert all(sampler.next() is None for _ in range(5))
  assert sampler.close(timeout_s=2) is True


def test_sampler_close_drops_a_live_iterator(server):
  srv, network = server
  writer = replay.TrajectoryQueueWriter(reverb.Client(f'localhost:{srv.port}'), 0)
  for i in range(2):
    writer.write(replay.split_trajectory(_trajectory(network, 1, i), np.zeros(T + 1), 0, i))
  sampler = replay.BatchSampler(f'localhost:{srv.port}', 2, timeout_ms=1000,
                                should_stop=lambda: False)
  assert sampler.next().data['meta'][:, 2].tolist() == [0, 1]
  assert sampler.close(timeout_s=10) is True  # a live server: the drop finishes
  assert sampler.close() is True  # nothing left to drop


def test_sampler_in_flight_samples_bounds_what_it_takes_from_a_full_queue():
  """Each item the sampler holds ahead of use ages in the learner's pipeline (policy lag)."""
  network, batch, size = _network(), 4, 24
  taken = {}
  for in_flight in (1, 0):  # 0: make_dataset's default, twice the batch
    srv = reverb.Server(replay.make_queue_tables_fn(lambda: network, T, size)(), port=None)
    client = reverb.Client(f'localhost:{srv.port}')
    writer = replay.TrajectoryQueueWriter(client, 0)
    for i in range(size):
      writer.write(replay.split_trajectory(_trajectory(network, 1, i), np.zeros(T + 1), 0, i))
    sampler = replay.BatchSampler(f'localhost:{srv.port}', batch, timeout_ms=1000,
                                  should_stop=lambda: False, max_in_flight_samples=in_flight)
    assert sampler.next().data['meta'][:, 2].tolist() == [0, 1, 2, 3]  # FIFO
    # The fetch thread fills its buffers, then blocks on the handover: wait until it settles.
    sizes, deadline = [-1], time.time() + 20
    while time.time() < deadline and (len(sizes) < 4 or len(set(sizes[-4:])) > 1):
      time.sleep(0.25)
      sizes.append(replay.queue_size(client))
    taken[in_flight] = size - sizes[-1]
    assert sampler.close(timeout_s=10)
    writer.close()  # an open writer holds the server's stop for seconds
    srv.stop()
  # The returned batch, the one in the handover, the one being assembled, one in-flight item.
  assert taken[1] == 3 * batch + 1, taken
  assert taken[0] >= taken[1] + batch - 1, taken  # about a batch more waits in the sampler
