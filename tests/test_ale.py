"""The ALE vector-env backend against EnvPool, frame stacking, and the environment factory."""

import numpy as np
import pytest

from s3ta.envs import ale, atari, factory
from s3ta.envs.base import EpisodeTracker


def _play(env, actions):
  steps = [env.reset()]
  steps += [env.step(a) for a in actions]
  return steps


@pytest.mark.parametrize('light', [True, False])
def test_backends_give_the_same_episodes(light):
  """Same seed, no no-ops, same actions: the same frames, rewards and episode ends.

  Pong with random actions loses both games within ~800 steps, so the run covers
  terminal steps and the reset steps after them. The one frame that differs is the
  terminal frame itself (rendered after the game ended), which no value uses.
  """
  kwargs = dict(light_observation=light, noop_max=1, num_threads=1)
  envpool_env = atari.AtariEnv('Pong', 2, seed=3, **kwargs)
  ale_env = ale.AleAtariEnv('Pong', 2, seed=3, **kwargs)
  assert (ale_env.num_actions, ale_env.observation_shape) == (envpool_env.num_actions,
                                                              envpool_env.observation_shape)
  actions = np.random.default_rng(0).integers(0, 6, (900, 2))
  a, b = _play(envpool_env, actions), _play(ale_env, actions)
  ends = 0
  for t, (x, y) in enumerate(zip(a, b)):
    for field in ('reward', 'discount', 'is_first', 'last'):
      np.testing.assert_array_equal(getattr(x, field), getattr(y, field), err_msg=f'{field} t={t}')
      assert getattr(x, field).dtype == getattr(y, field).dtype
    assert x.observation.dtype == y.observation.dtype == np.uint8
    assert x.observation.shape == y.observation.shape == (2,) + envpool_env.observation_shape
    same = ~np.asarray(x.last)
    np.testing.assert_array_equal(x.observation[same], y.observation[same], err_msg=f't={t}')
    ends += int(np.sum(x.last))
    if t and np.any(a[t - 1].last):  # the step after an end starts the next episode
      np.testing.assert_array_equal(x.is_first, a[t - 1].last)
      np.testing.assert_array_equal(x.reward[x.is_first], 0.0)
  assert ends == 2


def test_truncation_at_the_same_agent_step():
  for env in (atari.AtariEnv('Pong', 1, seed=0, max_episode_steps=5, light_observation=True),
              ale.AleAtariEnv('Pong', 1, seed=0, max_episode_steps=5, light_observation=True)):
    steps = _play(env, np.zeros((7, 1), np.int32))
    # reset, 5 steps (the 5th truncated), the new episode's first step, its next step.
    assert [bool(s.last[0]) for s in steps] == [False] * 5 + [True, False, False], env.backend
    assert [bool(s.is_first[0]) for s in steps] == [True] + [False] * 5 + [True, False], env.backend
    env.close()


def test_random_policy_returns_are_comparable():
  """Random play with the default 30 no-ops: Pong's random score is about -20.7 on both."""
  means = {}
  for env_class in (atari.AtariEnv, ale.AleAtariEnv):
    env = env_class('Pong', 4, seed=11, light_observation=True, num_threads=1)
    tracker, returns = EpisodeTracker(4), []
    env.reset()
    rng = np.random.default_rng(1)
    while len(returns) < 8:
      returns += [r for r, _ in tracker.update(env.step(rng.integers(0, env.num_actions, 4)))]
    means[env.backend] = np.mean(returns)
  assert all(-21 <= m <= -18.5 for m in means.values()), means
  assert abs(means['envpool'] - means['ale']) <= 1.5, means


def test_frame_stack_keeps_the_last_frames_and_refills_on_first_steps():
  env = atari.FrameStack(atari.AtariEnv('Pong', 2, seed=0, light_observation=True,
                                        max_episode_steps=3), 4)
  assert env.observation_shape == (84, 84, 4)
  raw = atari.AtariEnv('Pong', 2, seed=0, light_observation=True, max_episode_steps=3)
  frames = [raw.reset().observation[..., 0]]
  stacked = [env.reset().observation]
  for _ in range(5):
    frames.append(raw.step(np.array([2, 3])).observation[..., 0])
    stacked.append(env.step(np.array([2, 3])).observation)
  for k in range(4):  # reset: every slot is the first frame
    np.testing.assert_array_equal(stacked[0][..., k], frames[0])
  np.testing.assert_array_equal(stacked[2][..., 3], frames[2])  # newest last
  np.testing.assert_array_equal(stacked[2][..., 2], frames[1])
  np.testing.assert_array_equal(stacked[2][..., 1], frames[0])
  np.testing.assert_array_equal(stacked[2][..., 0], frames[0])
  # Step 4 is the first of the second episode (3-step episodes + EnvPool's reset step).
  for k in range(4):
    np.testing.assert_array_equal(stacked[4][..., k], frames[4])


def test_game_names_map_to_rom_ids():
  assert ale.rom_id('MsPacman') == 'ms_pacman' and ale.rom_id('UpNDown') == 'up_n_down'
  assert ale.rom_id('Pong') == 'pong' and ale.game_name('kung_fu_master') == 'KungFuMaster'
  assert set(atari.ATARI_GAMES) <= set(ale.available_games())


def test_factory_builds_each_environment_with_send_recv():
  catch = factory.make_env({'name': 'catch', 'rows': 5, 'columns': 3, 'pixel_scale': 2}, 4, 0)
  assert catch.observation_shape == (10, 6, 3) and catch.num_actions == 3
  catch.reset()
  catch.send(np.ones(4, np.int32))
  assert catch.recv().observation.shape == (4, 10, 6, 3)
  config = {'game': 'Breakout', 'backend': 'ale', 'light_observation': True, 'frame_stack': 4}
  assert factory.env_spec(config) == (4, (84, 84, 4))
  assert factory.frames_per_step(config) == 4 and factory.frames_per_step({'name': 'catch'}) == 1
  assert factory.game({'game': 'Pong-v5'}) == 'Pong' and factory.game({'name': 'catch'}) == ''


@pytest.mark.parametrize('config, message', [
    ({'name': 'cartpole'}, r"Unknown config.env.name 'cartpole'; valid: \('atari', 'catch', 'atari_ram', 'tmaze'\)"),
    ({'game': 'Pong', 'backend': 'gym'}, r"Unknown config.env.backend 'gym'; valid: \('envpool', 'ale'\)"),
    ({'game': 'Pongg', 'backend': 'ale'}, r"Unknown Atari game 'Pongg' for backend 'ale'; valid games: .*Pong"),
    ({'game': 'Pong', 'noop_max': 0}, r'config.env.noop_max must be an integer >= 1 .*got 0'),
    ({'game': 'Pong', 'frame_stack': 0}, r'config.env.frame_stack must be an integer >= 1, got 0'),
    ({'game': 'Pong', 'frame_stack': 4, 'frame_stack_fill': 'last'},
     r"Unknown config.env.frame_stack_fill 'last'; valid: \('first', 'zeros'\)"),
])
def test_factory_names_bad_values(config, message):
  with pytest.raises(ValueError, match=message):
    factory.validate(config)
