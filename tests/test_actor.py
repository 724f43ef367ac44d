"""A real actor (EnvPool Pong, CPU-jitted S3TA) writing real Reverb items."""

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import s3ta  # noqa: F401
from s3ta.acting.actor import Actor
from s3ta.acting.evaluator import Evaluator
from s3ta.networks import AgentInput, make_network
from s3ta.replay import queue as replay

reverb = pytest.importorskip('reverb')
atari = pytest.importorskip('s3ta.envs.atari')

T = 5
NUM_ENVS = 2
UNROLLS = 3
NETWORK = dict(kind='s3ta', conv_channels=(4, 8), conv_kernels=(8, 4), conv_strides=(4, 2),
               vision_lstm_channels=8, key_channels=2, num_heads=2, basis_frequencies=1,
               query_hidden=(16,), answer_hidden=(16,), lstm_size=16, head_hidden=16)
VERSION = 7


@pytest.fixture(scope='module')
def actor_items():
  env = atari.AtariEnv('Pong', NUM_ENVS, seed=3, light_observation=True, num_threads=1)
  network = make_network(NETWORK, env.num_actions, env.observation_shape)
  params = network.init(jax.random.PRNGKey(0))
  server = reverb.Server(replay.make_queue_tables_fn(lambda: network, T, 64)(), port=None)
  client = reverb.Client(f'localhost:{server.port}')
  writer = replay.TrajectoryQueueWriter(client, 0)
  seen = []
  actor = Actor(0, env, network, lambda: (VERSION, params), writer, unroll_length=T,
                rng_key=jax.random.PRNGKey(1), on_trajectory=lambda t, v: seen.append((t, v)))
  actor.run(max_unrolls=UNROLLS)
  assert client.server_info()[replay.TABLE_NAME].current_size == UNROLLS * NUM_ENVS
  dataset = replay.make_dataset(f'localhost:{server.port}', 1, timeout_ms=500)
  items = [jax.tree_util.tree_map(lambda x: x[0], s.data) for s in dataset.as_numpy_iterator()]
  del dataset
  server.stop()
  env.close()
  return network, params, items, seen


def _by_env(items):
  per_env = collections.defaultdict(list)
  for item in items:
    actor_id, env_index, unroll = item['meta'].tolist()
    assert actor_id == 0
    per_env[env_index].append((unroll, item))
  return {e: [item for _, item in sorted(v, key=lambda x: x[0])] for e, v in per_env.items()}


def test_items_have_t_plus_one_steps_and_overlap_by_one(actor_items):
  network, _, items, _ = actor_items
  per_env = _by_env(items)
  assert sorted(per_env) == list(range(NUM_ENVS))
  for env_items in per_env.values():
    assert len(env_items) == UNROLLS
    for item in env_items:
      assert item['observation'].shape == (T + 1,) + network.observation_shape
      assert item['action'].shape == (T + 1,)
      assert item['behaviour_logits'].shape == (T + 1, network.num_actions)
      np.testing.assert_array_equal(item['param_version'], VERSION)
    assert env_items[0]['is_first'][0]  # the first unroll starts an episode
    for a, b in zip(env_items, env_items[1:]):  # last step of one == first step of the next
      for field in replay.STEP_FIELDS:
        np.testing.assert_array_equal(a[field][-1], b[field][0], err_msg=field)


def test_initial_state_is_the_state_the_actor_had(actor_items):
  network, params, items, seen = actor_items
  per_env = _by_env(items)
  # Exactly what the actor's accumulator recorded before each unroll's first step.
  for unroll, (trajectory, versions) in enumerate(seen):
    np.testing.assert_array_equal(versions, VERSION)
    for env_index in range(NUM_ENVS):
      for got, want in zip(jax.tree_util.tree_leaves(per_env[env_index][unroll]['initial_state']),
                           jax.tree_util.tree_leaves(trajectory.initial_state)):
        np.testing.assert_array_equal(got, np.asarray(want)[env_index])
  # And it is the network's state: zeros at the start, then the state after unrolling the
  # previous item's first T steps; the recomputed logits are the behaviour logits.
  treedef = jax.tree_util.tree_structure(network.initial_state(1))
  for env_items in per_env.values():
    for leaf in jax.tree_util.tree_leaves(env_items[0]['initial_state']):
      np.testing.assert_array_equal(leaf, 0.0)
    for a, b in zip(env_items, env_items[1:]):
      state = jax.tree_util.tree_unflatten(
          treedef, [jnp.asarray(x)[None] for x in jax.tree_util.tree_leaves(a['initial_state'])])
      inputs = AgentInput(*(jnp.asarray(a[k][:T])[:, None] for k in
                            ('observation', 'prev_action', 'prev_reward', 'is_first')))
      outputs, final = network.unroll(params, inputs, state)
      np.testing.assert_allclose(outputs.logits[:, 0], a['behaviour_logits'][:T], atol=1e-4)
      for got, want in zip(jax.tree_util.tree_leaves(final),
                           jax.tree_util.tree_leaves(b['initial_state'])):
        np.testing.assert_allclose(np.asarray(got)[0], want, atol=1e-4)


def test_evaluator_reports_returns_and_flags_cut_episodes():
  env = atari.AtariEnv('Pong', 1, seed=5, light_observation=True, num_threads=1)
  network = make_network(NETWORK, env.num_actions, env.observation_shape)
  params = network.init(jax.random.PRNGKey(0))
  records = []
  evaluator = Evaluator(env, network, lambda: (3, params), game='Pong',
                        rng_key=jax.random.PRNGKey(2), period_s=1.0, num_episodes=1,
                        max_episode_steps=20, logger=records.append)
  record = evaluator.evaluate_once()
  assert record is records[0]
  assert record['param_version'] == 3 and record['episodes'] == 1 and record['truncated'] == 1
  assert 'human_normalized_score' not in record  # a cut episode is no score
  assert -21 <= record['mean_return'] <= 21


def test_on_episodes_hook_gets_each_finished_episode_once_and_extends_records():
  """Catch with 5 rows: both envs finish an episode every 4 steps, with return +1 or -1."""
  from s3ta.envs.catch import BatchedCatch  # pylint: disable=g-import-not-at-top
  env = BatchedCatch(2, rows=5, columns=3, pixel_scale=3, seed=0)
  network = make_network(dict(NETWORK, conv_channels=(4,), conv_kernels=(3,), conv_strides=(3,)),
                         env.num_actions, env.observation_shape)
  params = network.init(jax.random.PRNGKey(0))
  calls, records = [], []

  def on_episodes(returns):
    calls.append(returns)
    return {'hook_episodes': len(returns)}

  actor = Actor(0, env, network, lambda: (VERSION, params), None, unroll_length=T,
                rng_key=jax.random.PRNGKey(1), logger=records.append, log_period_s=0.0,
                on_episodes=on_episodes)
  actor.run(max_unrolls=2)  # T + 1 + T = 11 steps: episodes end at steps 4 and 8
  assert actor.env_steps == 11
  assert actor.episodes == 4 and set(actor.recent_returns) <= {-1.0, 1.0}
  assert [r for returns in calls for r in returns] == list(actor.recent_returns)
  assert [len(returns) for returns in calls] == [2, 2]  # one record per step: no empty calls
  with_episodes = [r for r in records if r['window_episodes']]
  assert [r['hook_episodes'] for r in with_episodes] == [2, 2]
  assert all('hook_episodes' not in r for r in records if not r['window_episodes'])
  for record, returns in zip(with_episodes, calls):
    assert record['window_return_mean'] == pytest.approx(np.mean(returns))
