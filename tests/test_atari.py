"""Real EnvPool Atari through AtariEnv: shapes, EnvStep semantics at episode ends, validation."""

import numpy as np
import pytest

from s3ta.envs import atari, human_scores
from s3ta.envs.base import EpisodeTracker


def test_pong_rgb_steps_are_channel_last_uint8():
  env = atari.AtariEnv('Pong', num_envs=2, seed=1)
  assert (env.num_envs, env.num_actions, env.observation_shape) == (2, 6, (210, 160, 3))
  first = env.reset()
  assert first.observation.shape == (2, 210, 160, 3) and first.observation.dtype == np.uint8
  np.testing.assert_array_equal(first.is_first, [True, True])
  np.testing.assert_array_equal(first.discount, [0.0, 0.0])
  np.testing.assert_array_equal(first.last, [False, False])
  step = env.step(np.array([0, 1]))
  assert step.observation.shape == (2, 210, 160, 3) and step.observation.dtype == np.uint8
  assert step.reward.dtype == np.float32 and step.discount.dtype == np.float32
  np.testing.assert_array_equal(step.is_first, [False, False])
  np.testing.assert_array_equal(step.discount, [1.0, 1.0])
  # Pong's frame has the orange-brown background colour (144, 72, 17) in channel-last layout.
  np.testing.assert_array_equal(step.observation[0, 100, 80], [144, 72, 17])
  env.close()


def test_truncated_episode_ends_then_next_step_starts_new_episode():
  env = atari.AtariEnv('Pong', num_envs=2, seed=0, max_episode_steps=3)
  env.reset()
  tracker = EpisodeTracker(2)
  steps = [env.step(np.array([1, 2])) for _ in range(8)]
  for t, s in enumerate(steps):
    ended = tracker.update(s)
    if t in (2, 6):  # third step of each episode: truncated
      np.testing.assert_array_equal(s.last, [True, True])
      np.testing.assert_array_equal(s.discount, [0.0, 0.0])
      np.testing.assert_array_equal(s.is_first, [False, False])
      # Episode 2 also counts the reset step that starts it.
      assert [n for _, n in ended] == ([3, 3] if t == 2 else [4, 4])
    elif t in (3, 7):  # EnvPool's reset step: first obs of the new episode, reward 0
      np.testing.assert_array_equal(s.is_first, [True, True])
      np.testing.assert_array_equal(s.discount, [0.0, 0.0])
      np.testing.assert_array_equal(s.reward, [0.0, 0.0])
      np.testing.assert_array_equal(s.last, [False, False])
    else:
      np.testing.assert_array_equal(s.discount, [1.0, 1.0])
      assert not s.is_first.any() and not s.last.any() and not ended


def test_same_seed_same_frames_and_send_recv_equals_step():
  a = atari.AtariEnv('Breakout', num_envs=2, seed=7)
  b = atari.AtariEnv('Breakout', num_envs=2, seed=7)
  np.testing.assert_array_equal(a.reset().observation, b.reset().observation)
  actions = np.array([1, 3])
  b.send(actions)
  np.testing.assert_array_equal(a.step(actions).observation, b.recv().observation)
  with pytest.raises(ValueError, match='without a pending send'):
    b.recv()
  b.close()
  with pytest.raises(ValueError, match='closed'):
    b.step(actions)


def test_channel_last_matches_transpose():
  frames = np.random.default_rng(0).integers(0, 256, (3, 3, 5, 4), dtype=np.uint8)
  out = atari._channel_last(frames)
  np.testing.assert_array_equal(out, np.transpose(frames, (0, 2, 3, 1)))
  assert out.flags['C_CONTIGUOUS']
  gray = frames[:, :1]
  np.testing.assert_array_equal(atari._channel_last(gray), np.transpose(gray, (0, 2, 3, 1)))


def test_light_observation_and_full_action_space():
  env = atari.AtariEnv('Pong', num_envs=1, light_observation=True, full_action_space=True)
  assert env.num_actions == 18 and env.observation_shape == (84, 84, 1)
  assert env.reset().observation.shape == (1, 84, 84, 1)


def test_validation():
  with pytest.raises(ValueError, match=r"Unknown Atari game 'Pongg' for backend 'envpool'; valid games: .*MontezumaRevenge.*Pong"):
    atari.AtariEnv('Pongg', num_envs=1)
  assert atari.validate_game('Pong-v5') == 'Pong'
  with pytest.raises(ValueError, match='num_envs'):
    atari.AtariEnv('Pong', num_envs=0)
  env = atari.AtariEnv('Pong', num_envs=2)
  env.reset()
  with pytest.raises(ValueError, match=r'actions must be in \[0, 6\)'):
    env.step(np.array([0, 6]))
  with pytest.raises(ValueError, match=r'shape \(2,\)'):
    env.step(np.array([0]))


def test_standard_games_are_in_envpool_and_have_reference_scores():
  assert len(atari.ATARI_GAMES) == len(set(atari.ATARI_GAMES)) == 57
  assert set(atari.ATARI_GAMES) <= set(atari.available_games())
  assert set(atari.ATARI_GAMES) == set(human_scores.SCORES)
