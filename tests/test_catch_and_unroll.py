"""Catch dynamics, the actors' action selection and the overlapping unrolls they produce."""

import warnings

import jax
import numpy as np
import pytest

from s3ta.acting import UnrollAccumulator, agent_input, make_select_action
from s3ta.envs.base import EpisodeTracker
from s3ta.envs.catch import BALL_COLOUR, PADDLE_COLOUR, BatchedCatch
from s3ta.networks import make_network

from tests.test_networks import SMALL

pytestmark = pytest.mark.core  # pure-JAX core only: also run on current JAX


def test_catch_episode_rewards_a_catch_and_resets_in_the_terminal_step():
  env = BatchedCatch(2, rows=5, columns=3, seed=0)
  first = env.reset()
  assert first.observation.shape == (2, 5, 3, 3) and first.observation.dtype == np.uint8
  assert first.is_first.all() and not first.last.any()
  ball_cols = [int(np.argwhere((first.observation[i] == BALL_COLOUR).all(-1))[0][1]) for i in range(2)]
  paddle = [int(np.argwhere((first.observation[i, -1] == PADDLE_COLOUR).all(-1))[0][0]) for i in range(2)]
  # Env 0 follows the ball, env 1 runs away from it.
  tracker = EpisodeTracker(2)
  for t in range(4):
    toward = np.sign(ball_cols[0] - paddle[0]) + 1
    away = 0 if ball_cols[1] >= 1 else 2
    step = env.step(np.array([toward, away]))
    paddle[0] = int(np.clip(paddle[0] + toward - 1, 0, 2))
    finished = tracker.update(step)
    if t < 3:
      assert not step.last.any() and (step.discount == 1).all() and (step.reward == 0).all()
  assert step.last.all() and step.is_first.all() and (step.discount == 0).all()
  np.testing.assert_array_equal(step.reward, [1.0, -1.0])
  assert finished == [(1.0, 4), (-1.0, 4)]


def test_catch_rejects_bad_actions():
  env = BatchedCatch(2)
  env.reset()
  with pytest.raises(ValueError, match='actions must be'):
    env.step(np.array([0, 3]))


def test_unrolls_overlap_by_one_step_and_carry_the_start_state():
  accumulator = UnrollAccumulator(3)
  emitted = []
  for t in range(7):
    step = dict(observation=np.full((2, 1, 1, 1), t, np.uint8), prev_action=np.full(2, t),
                prev_reward=np.zeros(2), is_first=np.zeros(2, bool), action=np.full(2, t),
                behaviour_logits=np.zeros((2, 3)), reward=np.full(2, float(t)), discount=np.ones(2))
    state = (np.full((2, 4), float(t)),)  # the state the actor had before step t
    out = accumulator.add(step, state)
    if out is not None:
      emitted.append(out)
  assert len(emitted) == 2
  np.testing.assert_array_equal(emitted[0].action[:, 0], [0, 1, 2, 3])
  np.testing.assert_array_equal(emitted[1].action[:, 0], [3, 4, 5, 6])
  np.testing.assert_array_equal(emitted[0].initial_state[0], 0.0)
  np.testing.assert_array_equal(emitted[1].initial_state[0], 3.0)
  assert emitted[0].observation.shape == (4, 2, 1, 1, 1)


def test_unroll_accumulator_rejects_incomplete_steps():
  with pytest.raises(ValueError, match='missing fields'):
    UnrollAccumulator(2).add({'observation': np.zeros(1)}, ())
  with pytest.raises(ValueError, match='unroll_length'):
    UnrollAccumulator(0)


@pytest.mark.parametrize('greedy', [False, True])
def test_select_action_on_a_device_equals_the_plain_function(greedy):
  env = BatchedCatch(3, seed=1)
  network = make_network(SMALL, env.num_actions, env.observation_shape)
  params = network.init(jax.random.PRNGKey(0))
  inputs = agent_input(env.reset(), np.zeros(3, np.int32))
  state, rng, cpu = network.initial_state(3), jax.random.PRNGKey(1), jax.devices('cpu')[0]
  plain, plain_state = make_select_action(network, greedy, jit=False)(params, rng, inputs, state)
  with warnings.catch_warnings():  # jax.jit(device=...) is deprecated; we must not use it
    warnings.filterwarnings('error', message='backend and device argument on jit')
    out, next_state = make_select_action(network, greedy, device=cpu)(params, rng, inputs, state,
                                                                      0.0)
  assert out.action.devices() == {cpu} and out.action.dtype == np.int32
  np.testing.assert_array_equal(out.action, plain.action)
  if greedy:
    np.testing.assert_array_equal(out.action, np.argmax(plain.logits, axis=-1))
  np.testing.assert_allclose(out.logits, plain.logits, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out.value, plain.value, rtol=1e-5, atol=1e-6)
  for ours, theirs in zip(jax.tree_util.tree_leaves(next_state),
                          jax.tree_util.tree_leaves(plain_state)):
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
