"""Parameter counts by sub-network (paper 002 Tables 3-4) and the matched baselines."""

import csv

import jax
import pytest

from s3ta.analysis import cli, parameter_counts
from s3ta.networks import make_network
from s3ta.networks import parameter_counts as counts_of

pytest.importorskip('ale_py')  # the RAM-feature spec comes from the ALE tables


def test_split_of_a_small_mlp_by_hand():
  # 8 features x 4 steps = 32 inputs -> 16 hidden units -> 6 logits and 1 value.
  network = make_network({'kind': 'mlp', 'mlp_hidden': (16,)}, 6, (8, 4, 1))
  counts = counts_of(network.init(jax.random.PRNGKey(0)))
  assert counts == {'inference': 32 * 16 + 16, 'policy': 16 * 6 + 6, 'value': 16 + 1}


def test_an_attention_projection_named_value_stays_in_inference():
  network = make_network({'kind': 'time_attention'}, 5, (5, 5, 3))
  counts = counts_of(jax.eval_shape(network.init, jax.random.PRNGKey(0)))
  assert counts['value'] == counts['policy'] // 5  # one output unit against 5, the same inputs


def test_the_ram_features_baselines_are_sized_like_g_awrl_on_pong():
  config = parameter_counts.load_config('experiments/ram_features.py')
  rows = {r['kind']: r for r in parameter_counts.table(config, ['gawrl', 'mlp', 'cnn1d'])}
  attention = rows['gawrl']['inference']
  for kind in ('mlp', 'cnn1d'):  # 002: "approximately constant across agent and baselines"
    assert abs(rows[kind]['inference'] - attention) <= 0.1 * attention, rows[kind]
  assert rows['mlp']['policy'] == 32 * 6 + 6 == rows['mlp']['paper_policy']  # FC ends in 32 units


def test_cli_prints_and_writes_the_table_and_names_bad_kinds(tmp_path, capsys):
  assert cli.main(['parameter-counts', '--config=experiments/ram_features.py:Breakout',
                   '--kinds=mlp,dawrl', f'--out={tmp_path}']) == 0
  printed = capsys.readouterr().out
  assert 'atari_ram Breakout' in printed and '| dawrl |' in printed
  with open(tmp_path / 'parameter_counts.csv') as f:
    rows = list(csv.DictReader(f))
  # Breakout: 35 features x 4 steps = 140 inputs into the FC's first 288 units.
  assert [r['kind'] for r in rows] == ['mlp', 'dawrl']
  assert int(rows[0]['inference']) == 140 * 288 + 288 + 288 * 256 + 256 + 256 * 32 + 32
  assert cli.main(['parameter-counts', '--config=experiments/ram_features.py', '--kinds=mlp,cnn2d']) == 2
  assert "'cnn2d'" in capsys.readouterr().err
  assert cli.main(['parameter-counts', '--config=experiments/nope.py']) == 2
  assert 'nope.py' in capsys.readouterr().err
  not_a_config = tmp_path / 'not_a_config.py'
  not_a_config.write_text('x = 1\n')
  assert cli.main(['parameter-counts', f'--config={not_a_config}']) == 2
  assert capsys.readouterr().err == (f"error: --config file '{not_a_config}' defines no get_config(); "
                                     'expected an experiment config such as experiments/ram_features.py.\n')
  assert cli.main(['parameter-counts', '--config=experiments/tmaze.py', '--kinds=,', f'--out={tmp_path}/k']) == 2
  assert capsys.readouterr().err.startswith("error: --kinds names no network kind; valid: ('s3ta',")
  assert not (tmp_path / 'k').exists()
  # A T-maze config compares 002 Table 4's two agents by default.
  assert cli.main(['parameter-counts', '--config=experiments/tmaze.py']) == 0
  printed = capsys.readouterr().out
  assert '| time_attention |' in printed and '| resnet_lstm |' in printed
  assert '| gawrl |' not in printed and '47,296' in printed


def test_the_tmaze_attention_agent_has_002_table_4_heads():
  config = parameter_counts.load_config('experiments/tmaze.py:attention')
  row, = parameter_counts.table(config, ['time_attention'])
  # 32 views x d_v 32 tokens straight into the heads: 1,024 x 5 + 5 and 1,024 + 1.
  assert (row['policy'], row['value']) == (row['paper_policy'], row['paper_value']) == (5_125, 1_025)
