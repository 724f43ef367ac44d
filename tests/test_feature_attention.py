"""`python -m s3ta.analysis feature-attention` on checkpoints of the feature agents: the run's
own environment is rebuilt, and the maps are written labelled (PNG + CSV)."""

import csv
import os

import jax
import numpy as np
import pytest

from experiments import ram_features, tmaze
from s3ta.analysis import cli
from s3ta.analysis import feature_attention
from s3ta.analysis.rollout import training_state_template
from s3ta.envs import factory
from s3ta.networks import make_network
from s3ta.utils import checkpoint

pytest.importorskip('ale_py')


def _checkpoint(workdir, config):
  num_actions, shape = factory.env_spec(config.env)
  network = make_network(config.network.to_dict(), num_actions, shape)
  state = training_state_template(network, config.to_dict())
  state = jax.tree_util.tree_map(lambda s: jax.numpy.zeros(s.shape, s.dtype), state)
  state = state._replace(params=network.init(jax.random.PRNGKey(0)))
  checkpoint.save(checkpoint.checkpoint_dir(str(workdir)), 3, state, config=config,
                  network_config=config.network.to_dict())


def _analyse(tmp_path, config, steps):
  """Saves an initial checkpoint of `config`'s run, runs the CLI on it; returns the out dir."""
  _checkpoint(tmp_path / 'run', config)
  out = str(tmp_path / 'out')
  assert cli.main(['feature-attention', f'--checkpoint={tmp_path / "run"}', f'--out={out}',
                   f'--steps={steps}']) == 0
  return out


def _read_csv(out):
  with open(os.path.join(out, 'feature_attention.csv')) as f:
    return list(csv.reader(f))


def test_gawrl_maps_are_labelled_with_feature_names(tmp_path):
  config = ram_features.get_config('Pong')
  config.network.kind = 'gawrl'
  out = _analyse(tmp_path, config, steps=4)
  rows = _read_csv(out)
  assert rows[0][:2] == ['head', 'query'] and len(rows[0]) == 2 + 8 * 4
  assert 'ball_x@t-0' in rows[0] and 'player_y@t-3' in rows[0]
  assert len(rows) == 1 + 4 * 32  # 4 heads x 32 query tokens
  for row in rows[1:]:
    assert abs(sum(float(v) for v in row[2:]) - 1.0) < 1e-3  # each query's weights sum to 1
  assert os.path.getsize(os.path.join(out, 'feature_attention.png')) > 1000
  with open(os.path.join(out, 'feature_mass.csv')) as f:
    mass = list(csv.DictReader(f))
  assert len(mass) == 4 * 8  # heads x features
  for head in range(4):  # an average query's weights over the 8 features sum to 1
    assert sum(float(r['mass']) for r in mass if r['head'] == str(head)) == pytest.approx(1, abs=1e-3)
  assert not os.path.exists(os.path.join(out, 'irrelevant_mass.csv'))  # Pong alone: no noise


def test_feature_mass_sums_a_features_tokens_against_a_uniform_share():
  labels = ['a@t-1', 'a@t-0', 'b@t-1', 'b@t-0']
  steps = np.array([[[0.7, 0.1, 0.1, 0.1], [0.25] * 4],   # [steps, heads, L]: d-AWRL's selection
                    [[0.1, 0.1, 0.4, 0.4], [0.25] * 4]])
  rows = feature_attention.feature_mass(labels, steps)
  assert [(r['head'], r['feature']) for r in rows] == [(0, 'a'), (0, 'b'), (1, 'a'), (1, 'b')]
  assert rows[0]['mass'] == pytest.approx((0.8 + 0.2) / 2)
  assert rows[1]['mass'] == pytest.approx((0.2 + 0.8) / 2)
  assert rows[0]['lift'] == pytest.approx(1.0)  # half the mass on half the tokens
  assert rows[0]['std_over_steps'] == pytest.approx(0.3)  # the map follows the observation
  assert rows[2]['lift'] == pytest.approx(1.0) and rows[2]['std_over_steps'] == pytest.approx(0)
  # g-AWRL [steps, heads, L, L]: the mass each key receives from an average query.
  full = np.zeros((1, 1, 4, 4))
  full[0, 0, :2, 0] = 1.0  # the queries of `a` read a@t-1
  full[0, 0, 2:, 2:] = 0.5  # those of `b` split between b's tokens
  a, b = feature_attention.feature_mass(labels, full)
  assert (a['mass'], b['mass']) == (pytest.approx(0.5), pytest.approx(0.5))
  three = ['a@t-0', 'b@t-1', 'b@t-0', 'c@t-0']  # unequal token counts: shares 1/4, 2/4, 1/4
  rows = feature_attention.feature_mass(three, np.array([[[0.5, 0.25, 0.25, 0.0]]]))
  assert [r['lift'] for r in rows] == [pytest.approx(2.0), pytest.approx(1.0), pytest.approx(0.0)]


def test_irrelevant_mass_adds_the_random_and_distractor_features_against_their_share():
  labels = ['ball_x@t-1', 'ball_x@t-0', 'random_0@t-1', 'random_0@t-0',
            'distractor1_ball_x@t-1', 'distractor1_ball_x@t-0', 'player_y@t-1', 'player_y@t-0']
  maps = np.array([[[0.3, 0.3, 0.05, 0.05, 0.0, 0.1, 0.1, 0.1],   # [steps, heads, L]
                    [0.0, 0.0, 0.25, 0.25, 0.25, 0.25, 0.0, 0.0]]])
  rows = feature_attention.irrelevant_mass(labels, feature_attention.feature_mass(labels, maps))
  assert [(r['head'], r['features']) for r in rows] == [(0, 2), (1, 2)]
  assert rows[0]['mass'] == pytest.approx(0.2) and rows[0]['share'] == pytest.approx(0.5)
  assert rows[0]['lift'] == pytest.approx(0.4)  # looks away from the noise
  assert rows[1]['mass'] == pytest.approx(1.0) and rows[1]['lift'] == pytest.approx(2.0)


def test_random_features_get_an_irrelevant_mass_csv(tmp_path):
  config = ram_features.get_config('Pong,2')
  config.network.kind = 'dawrl'
  out = _analyse(tmp_path, config, steps=3)
  with open(os.path.join(out, 'irrelevant_mass.csv')) as f:
    rows = list(csv.DictReader(f))
  assert [r['head'] for r in rows] == ['0', '1', '2', '3']
  for row in rows:  # 2 random features of 10, 4 tokens each
    assert row['features'] == '2' and float(row['share']) == pytest.approx(0.2)
    assert 0.0 <= float(row['mass']) <= 1.0


def test_time_attention_maps_over_past_views_and_bad_uses_are_named(tmp_path, capsys):
  config = tmaze.get_config('attention')
  out = _analyse(tmp_path, config, steps=3)
  rows = _read_csv(out)
  assert rows[0] == ['head'] + [f't-{31 - i}' for i in range(32)] and len(rows) == 5
  with open(os.path.join(out, 'reward_attention.csv')) as f:
    assert [row['head'] for row in csv.DictReader(f)] == ['0', '1', '2', '3']
  capsys.readouterr()
  assert cli.main(['feature-attention', f'--out={out}']) == 2  # no checkpoint
  assert capsys.readouterr().err == (
      'error: feature-attention needs --checkpoint (the run knows its environment).\n')
  baseline = tmaze.get_config('')
  _checkpoint(tmp_path / 'lstm', baseline)
  assert cli.main(['feature-attention', f'--checkpoint={tmp_path / "lstm"}', f'--out={out}']) == 2
  assert capsys.readouterr().err == (
      "error: feature-attention shows the maps of ('gawrl', 'dawrl', 'time_attention') agents; "
      "this checkpoint holds a 'resnet_lstm' network.\n")


def test_reward_attention_is_the_mass_on_past_reward_views_against_their_share():
  observation = np.zeros((5, 5, 4 * 3), np.uint8)  # 4 views, oldest first
  observation[0, 4, 1 * 3 + 1] = 255  # view 1 shows the reward; view 2 only a wall
  observation[2, 2, 2 * 3 + 0] = 255
  np.testing.assert_array_equal(feature_attention.reward_views(observation),
                                [False, True, False, False])
  shown = np.array([[False, True, False, False],   # a sighting in the window
                    [False, False, False, True],   # only the newest view: left out
                    [True, True, False, False]])
  maps = np.array([[[0.1, 0.6, 0.1, 0.2], [0.25] * 4],
                   [[0.0, 0.0, 0.0, 1.0]] * 2,
                   [[0.3, 0.3, 0.2, 0.2], [0.25] * 4]])  # [steps, heads, views]
  head0, head1 = feature_attention.reward_attention(maps, shown)
  assert head0['steps'] == head1['steps'] == 2
  assert head0['mass'] == pytest.approx((0.6 + 0.6) / 2)
  assert head0['share'] == pytest.approx((1 / 4 + 2 / 4) / 2)
  assert head0['lift'] == pytest.approx(0.6 / 0.375)
  assert head1['lift'] == pytest.approx(1.0)  # uniform attention: no lift
  # The first view of the newest run of sightings: view 1, then view 0 (run 0-1).
  assert head0['latest_mass'] == pytest.approx((0.6 + 0.3) / 2)
  assert head0['latest_lift'] == pytest.approx(0.45 * 4)
  assert head1['latest_lift'] == pytest.approx(1.0)


def test_latest_sighting_start_is_the_first_view_of_the_newest_run():
  past = np.array([[True, True, False, True, True, False],
                   [False] * 6,
                   [True] * 6,
                   [False, False, False, False, False, True]])
  np.testing.assert_array_equal(feature_attention.latest_sighting_start(past), [3, -1, 0, 5])


def test_the_agent_runner_steps_a_feature_agent_and_records_its_maps(tmp_path):
  config = ram_features.get_config('Pong')
  config.network.kind = 'dawrl'
  _checkpoint(tmp_path / 'run', config)
  from s3ta.analysis import rollout  # pylint: disable=g-import-not-at-top
  env = factory.make_env(config.env, 2, seed=0)
  agent = rollout.restore_agent(str(tmp_path / 'run'), env.num_actions, env.observation_shape)
  runner = rollout.AgentRunner(agent, env, seed=0)
  record, step = runner.step()
  assert record.attention.shape == (4, 32)  # heads x (8 features x 4 steps): selection maps
  assert record.queries is None and record.keys is None  # no spatial queries or keys
  assert step.observation.shape == (2, 8, 4, 1)
  runner.close()


def test_tmaze_events_account_for_every_step_of_every_episode(tmp_path, capsys):
  _checkpoint(tmp_path / 'lstm', tmaze.get_config(''))
  out = str(tmp_path / 'events')
  assert cli.main(['tmaze-events', f'--checkpoint={tmp_path / "lstm"}', f'--out={out}',
                   '--episodes=3']) == 0
  with open(os.path.join(out, 'tmaze_events.csv')) as f:
    rows = list(csv.DictReader(f))
  assert [row['episode'] for row in rows] == ['0', '1', '2']
  for row in rows:
    assert int(row['move']) + int(row['blocked']) + int(row['noop']) == 200  # max_steps
    assert float(row['episode_return']) == int(row['reward'])  # the env's rewards, tallied
    assert int(row['longest_stall']) <= int(row['blocked']) + int(row['noop'])
    assert int(row['reversal']) <= int(row['move'])
  with open(os.path.join(out, 'tmaze_blocked.csv')) as f:
    blocked = list(csv.DictReader(f))
  assert sum(int(b['blocked_moves']) for b in blocked) == sum(int(r['blocked']) for r in rows)
  assert all(b['move'] in ('up', 'right', 'down', 'left') for b in blocked)
  with open(os.path.join(out, 'tmaze_reversals.csv')) as f:
    reversals = list(csv.DictReader(f))
  assert sum(int(r['reversals']) for r in reversals) == sum(int(r['reversal']) for r in rows)
  for row in rows:
    assert int(row['centre_down']) <= int(row['move'])
  assert os.path.getsize(os.path.join(out, 'tmaze_places.png')) > 1000
  assert cli.main(['tmaze-events', f'--checkpoint={tmp_path / "lstm"}', f'--out={out}',
                   '--episodes=0']) == 2
  config = ram_features.get_config('Pong')
  _checkpoint(tmp_path / 'ram', config)
  capsys.readouterr()
  assert cli.main(['tmaze-events', f'--checkpoint={tmp_path / "ram"}', f'--out={out}']) == 2
  assert "tmaze-events plays the T-maze; this checkpoint was trained on 'atari_ram'" in (
      capsys.readouterr().err)
