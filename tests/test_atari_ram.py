"""RAM-feature Atari (`s3ta/envs/atari_ram.py`): the papers' feature counts, the bytes the
features show against a separately driven ALE, their history, order and the random
features, the episode semantics, and bad input named."""

import numpy as np
import pytest

from s3ta.envs import atari_ram, factory
from s3ta.networks import make_network

ale_py = pytest.importorskip('ale_py')


def test_feature_tables_have_the_papers_counts():
  counts = {game: len(table) for game, table in atari_ram.FEATURES.items()}
  assert counts == {'Pong': 8, 'DemonAttack': 10, 'Asteroids': 41, 'Breakout': 35}
  for table in atari_ram.FEATURES.values():
    addresses = [a for _, a in table]
    assert len(set(addresses)) == len(addresses) and 0 <= min(addresses) and max(addresses) < 128


def _reference_ale(seed):
  from ale_py import roms  # pylint: disable=g-import-not-at-top
  ale = ale_py.ALEInterface()
  ale.setLoggerMode(ale_py.LoggerMode.Error)
  ale.setInt('random_seed', seed)
  ale.setFloat('repeat_action_probability', 0.0)
  ale.setInt('max_num_frames_per_episode', 27000 * 4)
  ale.loadROM(roms.get_rom_path('pong'))
  return ale


def test_features_are_the_annotated_ram_bytes_with_their_history():
  env = atari_ram.RamFeatureEnv('Pong', 1, seed=5, history=4, noop_max=1, shuffle_seed=3)
  reference = _reference_ale(5)
  actions = env._action_set  # pylint: disable=protected-access
  step = env.reset()
  reference.reset_game()
  reference.act(actions[0])  # the one no-op of noop_max=1
  assert step.observation.shape == (1, 8, 4, 1) and step.observation.dtype == np.uint8
  position = {name: j for j, name in enumerate(env.feature_names)}
  address = dict(atari_ram.FEATURES['Pong'])
  ram = reference.getRAM()
  for name, j in position.items():  # a new episode's history is its first value, T times
    np.testing.assert_array_equal(step.observation[0, j, :, 0], ram[address[name]])
  rng = np.random.default_rng(0)
  history = [ram]
  for _ in range(6):
    a = int(rng.integers(0, env.num_actions))
    step = env.step(np.asarray([a]))
    for _ in range(4):
      reference.act(actions[a])
    history.append(reference.getRAM())
  for name, j in position.items():  # oldest first: the last 4 agent steps
    np.testing.assert_array_equal(step.observation[0, j, :, 0],
                                  [h[address[name]] for h in history[-4:]])
  assert step.reward[0] == 0.0 and step.discount[0] == 1.0 and not step.is_first[0]


def test_order_is_fixed_by_the_shuffle_seed_and_random_features_are_fresh_bytes():
  names_a, perm_a = atari_ram.feature_order('Pong', 8, shuffle_seed=1)
  names_b, _ = atari_ram.feature_order('Pong', 8, shuffle_seed=1)
  names_c, _ = atari_ram.feature_order('Pong', 8, shuffle_seed=2)
  assert names_a == names_b != names_c and sorted(perm_a) == list(range(16))
  assert sorted(names_a) == sorted([n for n, _ in atari_ram.FEATURES['Pong']] +
                                   [f'random_{i}' for i in range(8)])
  env = atari_ram.RamFeatureEnv('Pong', 2, seed=0, random_features=8, shuffle_seed=1)
  assert env.feature_names == names_a and env.observation_shape == (16, 4, 1)
  env.reset()
  steps = [env.step(np.zeros(2, np.int64)).observation for _ in range(3)]
  random_rows = [j for j, n in enumerate(names_a) if n.startswith('random_')]
  latest = np.stack([s[:, random_rows, -1, 0] for s in steps])
  assert len(np.unique(latest)) > 20  # 48 bytes drawn afresh, not a constant


def test_periodic_random_features_are_slow_full_range_sines_of_their_own():
  env = atari_ram.RamFeatureEnv('Pong', 2, seed=3, random_features=6, random_kind='periodic')
  rows = [j for j, n in enumerate(env.feature_names) if n.startswith('random_')]
  first = env.reset().observation[:, rows, -1, 0]
  series = np.stack([first] + [env.step(np.zeros(2, np.int64)).observation[:, rows, -1, 0]
                               for _ in range(300)]).astype(int)  # [t, env, feature]
  # 003: no large change from one step to the next (period >= 16 steps: <= 50 of 255) ...
  assert np.abs(np.diff(series, axis=0)).max() <= 51
  # ... yet each sweeps the whole byte range within 300 steps (period <= 256).
  assert series.min(axis=0).max() <= 5 and series.max(axis=0).min() >= 250
  assert not np.array_equal(series[:, 0], series[:, 1])  # each env its own periods and phases
  # A sine through its first samples: 127.5 (1 + sin(w t + phi)) for one fitted w, phi.
  t, values = np.arange(301), series[:, 0, 0] / 127.5 - 1.0
  spectrum = np.abs(np.fft.rfft(values, n=8192))
  w = 2 * np.pi * np.argmax(spectrum) / 8192
  basis = np.stack([np.sin(w * t), np.cos(w * t)], axis=1)
  coefficients = np.linalg.lstsq(basis, values, rcond=None)[0]
  assert np.abs(basis @ coefficients - values).max() < 0.1
  again = atari_ram.RamFeatureEnv('Pong', 2, seed=3, random_features=6, random_kind='periodic')
  np.testing.assert_array_equal(again.reset().observation[:, rows, -1, 0], first)


def test_episode_end_then_a_first_step_as_the_pixel_backends():
  env = atari_ram.RamFeatureEnv('Pong', 1, seed=0, max_episode_steps=5, noop_max=1)
  env.reset()
  steps = [env.step(np.zeros(1, np.int64)) for _ in range(6)]
  assert [bool(s.last[0]) for s in steps] == [False] * 4 + [True, False]
  assert [float(s.discount[0]) for s in steps] == [1, 1, 1, 1, 0, 0]
  assert [bool(s.is_first[0]) for s in steps] == [False] * 5 + [True]
  assert steps[-1].reward[0] == 0.0


def test_factory_builds_it_and_the_mlp_network_takes_its_observations():
  config = {'name': 'atari_ram', 'game': 'Breakout', 'ram_history': 4, 'random_features': 3}
  num_actions, shape = factory.env_spec(config)
  assert (num_actions, shape) == (4, (38, 4, 1)) and factory.frames_per_step(config) == 4
  assert factory.game(config) == 'Breakout'
  network = make_network({'kind': 'mlp', 'mlp_hidden': (16,)}, num_actions, shape)
  import jax  # pylint: disable=g-import-not-at-top
  params = network.init(jax.random.PRNGKey(0))
  env = factory.make_env(config, 2, seed=0)
  step = env.reset()
  from s3ta.acting import agent_input  # pylint: disable=g-import-not-at-top
  out, _ = network.step(params, agent_input(step, np.zeros(2, np.int32)), network.initial_state(2))
  assert out.logits.shape == (2, 4) and np.all(np.isfinite(out.logits))


@pytest.mark.parametrize('override, message', [
    ({'game': 'Seaquest'}, "no RAM feature table for game 'Seaquest'; games with one: "
                           "('Asteroids', 'Breakout', 'DemonAttack', 'Pong')"),
    ({'random_features': 2000}, 'random_features must be an integer in [0, 1024], got 2000'),
    ({'ram_history': 0}, 'ram_history must be an integer in [1, 64], got 0'),
    ({'random_kind': 'gaussian'},
     "random_kind must be one of ('uniform', 'periodic'), got 'gaussian'"),
    ({'frame_stack': 4}, 'frame_stack must be 1 for atari_ram'),
])
def test_bad_ram_settings_are_named(override, message):
  config = dict({'name': 'atari_ram', 'game': 'Pong'}, **override)
  with pytest.raises(ValueError) as error:
    factory.validate(config)
  assert message in str(error.value)


def test_the_ram_features_config_parses_its_argument():
  from experiments import ram_features  # pylint: disable=g-import-not-at-top
  config = ram_features.get_config('Breakout,32')
  assert (config.env.name, config.env.game, config.env.random_features) == (
      'atari_ram', 'Breakout', 32)
  assert config.network.kind == 'mlp' and config.single_machine.algorithm == 'ppo'
  assert factory.env_spec(config.env)[1] == (35 + 32, 4, 1)
  with pytest.raises(ValueError, match="Unknown ram_features argument 'Seaquest'"):
    ram_features.get_config('Seaquest')
  with pytest.raises(ValueError, match="Unknown ram_features argument 'Pong,many'"):
    ram_features.get_config('Pong,many')


def test_distractor_games_append_their_features_and_run_on_their_own():
  env = atari_ram.RamFeatureEnv('Pong', 1, seed=0, distractors=2, distractor_policy='random',
                                shuffle_seed=4, noop_max=1)
  assert env.observation_shape == (24, 4, 1)
  names = env.feature_names
  assert sorted(n for n in names if n.startswith('distractor2_')) == sorted(
      f'distractor2_{n}' for n, _ in atari_ram.FEATURES['Pong'])
  env.reset()
  rows = lambda prefix: [j for j, n in enumerate(names) if n.startswith(prefix)]
  own = [j for j, n in enumerate(names) if not n.startswith('distractor')]
  for _ in range(40):
    step = env.step(np.asarray([0]))  # the agent stands still; the distractors play randomly
  latest = step.observation[0, :, -1, 0]
  assert not np.array_equal(latest[rows('distractor1_')], latest[rows('distractor2_')])
  order = lambda idx: [names[j].split('_', 1)[-1] for j in idx]
  own_by_name = dict(zip([names[j] for j in own], latest[own]))
  d1_by_name = dict(zip(order(rows('distractor1_')), latest[rows('distractor1_')]))
  assert own_by_name['player_y'] != d1_by_name['player_y'] or (
      own_by_name['ball_x'] != d1_by_name['ball_x'])
  with pytest.raises(ValueError, match="distractor_policy '' cannot play 1 distractor game"):
    factory.validate({'name': 'atari_ram', 'game': 'Pong', 'distractors': 1})
  with pytest.raises(ValueError, match=r'distractors must be an integer in \[0, 7\], got 9'):
    factory.validate({'name': 'atari_ram', 'game': 'Pong', 'distractors': 9,
                      'distractor_policy': 'random'})


def _feature_agent_checkpoint(workdir, press: int, shuffle_seed: int, **env_overrides):
  """A checkpoint of an FC agent trained on Pong's features alone that always presses `press`."""
  import jax  # pylint: disable=g-import-not-at-top
  from experiments import ram_features  # pylint: disable=g-import-not-at-top
  from s3ta.analysis.rollout import training_state_template  # pylint: disable=g-import-not-at-top
  from s3ta.utils import checkpoint  # pylint: disable=g-import-not-at-top
  config = ram_features.get_config('Pong')
  config.env.feature_shuffle_seed = shuffle_seed
  config.env.update(env_overrides)
  config.network.mlp_hidden = (8,)
  num_actions, shape = factory.env_spec(config.env)
  network = make_network(config.network.to_dict(), num_actions, shape)
  state = training_state_template(network, config.to_dict())
  state = jax.tree_util.tree_map(lambda s: jax.numpy.zeros(s.shape, s.dtype), state)
  params = jax.tree_util.tree_map(np.array, network.init(jax.random.PRNGKey(0)))  # writable
  policy = params['core']['head']['policy']
  policy['kernel'][:] = 0.0
  policy['bias'][:] = np.where(np.arange(num_actions) == press, 50.0, 0.0)  # p(press) ~ 1
  checkpoint.save(checkpoint.checkpoint_dir(str(workdir)), 7, state._replace(params=params),
                  config=config, network_config=config.network.to_dict())
  return str(workdir)


def test_distractor_games_played_by_a_trained_agent_move_as_it_plays(tmp_path):
  # Pong's minimal actions: 2 (RIGHT) moves the paddle up, 3 (LEFT) down.
  up = _feature_agent_checkpoint(tmp_path / 'up', press=2, shuffle_seed=5)
  down = _feature_agent_checkpoint(tmp_path / 'down', press=3, shuffle_seed=6)
  heights = {}
  for name, run in (('up', up), ('down', down)):
    config = {'name': 'atari_ram', 'game': 'Pong', 'distractors': 2, 'num_envs': 2,
              'distractor_policy': 'checkpoint', 'distractor_checkpoint': run,
              'feature_shuffle_seed': 1, 'noop_max': 1}
    env = factory.make_env(config, 2, seed=0)
    player = env._player  # pylint: disable=protected-access
    names = env.feature_names
    env.reset()
    for _ in range(60):
      step = env.step(np.zeros(2, np.int64))  # the agent stands still
    latest = step.observation[:, :, -1, 0]  # [env, feature]
    # The appended rows are the player's games, read back in the game's own order.
    own = player.env.feature_names  # the trained agent's order
    games = player.env._history[:, :, -1].reshape(2, 2, -1)  # pylint: disable=protected-access
    for env_i in range(2):
      for d in (1, 2):
        for feature in ('player_y', 'ball_x', 'enemy_y'):
          assert latest[env_i, names.index(f'distractor{d}_{feature}')] == (
              games[env_i, d - 1, own.index(feature)])
    heights[name] = [latest[i, names.index(f'distractor{d}_player_y')] for i in range(2)
                     for d in (1, 2)]
    env.close()
  assert max(heights['up']) + 100 < min(heights['down']), heights  # the agent steers them


def test_a_distractor_checkpoint_of_another_task_is_named(tmp_path):
  config = {'name': 'atari_ram', 'game': 'Pong', 'distractors': 1,
            'distractor_policy': 'checkpoint'}
  with pytest.raises(ValueError, match='distractor_checkpoint must name the workdir'):
    factory.validate(config)
  with pytest.raises(ValueError, match='does not exist'):
    factory.make_env(dict(config, distractor_checkpoint=str(tmp_path / 'none')), 1, seed=0)
  noisy = _feature_agent_checkpoint(tmp_path / 'noisy', press=0, shuffle_seed=0, random_features=8)
  with pytest.raises(ValueError, match=r"it was trained on .*'random_features': 8"):
    factory.make_env(dict(config, distractor_checkpoint=noisy), 1, seed=0)
