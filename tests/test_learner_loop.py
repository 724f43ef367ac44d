"""The learner-loop stage (`benchmarks/stages.py`): real unrolls in the queue, all of them eaten."""

import numpy as np
import pytest

import s3ta  # noqa: F401
from benchmarks import stages
from experiments import catch
from s3ta.envs import factory
from s3ta.networks import make_network
from s3ta.replay import queue as replay

pytest.importorskip('reverb')

T, B = 4, 3


def _config_and_network():
  config = catch.get_config('nature')  # the quickest compile: the loop, not the network, is tested
  config.unroll_length, config.batch_size, config.num_actors = T, B, 2
  config.env.num_envs = 2
  num_actions, shape = factory.env_spec(config.env)
  return config, make_network(config.network.to_dict(), num_actions, shape)


def test_random_play_items_fit_the_queue_and_overlap_by_one_step():
  config, network = _config_and_network()
  items = stages.random_play_items(config, network, 6)
  spec = replay.item_spec(network, T)
  assert len(items) == 6
  for item in items:
    assert set(item) == set(spec)
    for name in ('observation', 'action', 'reward', 'discount', 'is_first', 'behaviour_logits'):
      assert item[name].shape == spec[name][0] and item[name].dtype == spec[name][1], name
  # Items come out env by env per unroll (2 envs): item k + 2 continues item k's environment.
  for k in range(4):
    np.testing.assert_array_equal(items[k]['observation'][-1], items[k + 2]['observation'][0])
  # Env 0's first 12 steps: Catch's ball falls for 9 steps, the 9th ends the episode.
  steps = {name: np.concatenate([items[k][name][:-1] for k in (0, 2, 4)])
           for name in ('is_first', 'action', 'prev_action', 'prev_reward', 'reward', 'discount')}
  np.testing.assert_array_equal(np.flatnonzero(steps['is_first']), [0, 9])
  np.testing.assert_array_equal(np.flatnonzero(steps['discount'] == 0), [8])
  assert steps['reward'][8] in (-1, 1) and not steps['reward'][:8].any()
  np.testing.assert_array_equal(steps['prev_action'][1:9], steps['action'][:8])
  assert steps['prev_action'][0] == steps['prev_action'][9] == 0  # zeroed at episode starts
  assert not steps['prev_reward'].any()  # the catch's reward is not carried into the new episode


def test_learner_loop_consumes_every_prefilled_batch_through_a_replay_process():
  config, network = _config_and_network()
  config.log_period_s = 0.5
  result = stages.learner_loop_fps(config, network, seconds=2.0, bare_steps_per_s=4.0,
                                         distinct_items=8)
  assert result['e_items_per_step'] == B
  assert result['e_steps'] >= 1 and result['e_seconds'] > 0
  assert result['e_learner_loop_fps'] == pytest.approx(
      result['e_steps'] * B * T / result['e_seconds'])
  assert 0 <= result['e_wait_share'] < 1
  assert result['e_param_fetchers'] == 2 and result['e_param_fetches_per_thread'] >= 1
