"""Attention on game objects (`s3ta/analysis/objects.py`, `attention-objects`): hand-built cases."""

import csv

import jax
import numpy as np
import pytest

from s3ta.analysis import cli, objects, rollout
from s3ta.learning import learner_core
from s3ta.networks import NetworkConfig, make_network
from s3ta.utils import checkpoint as checkpoint_lib

BALL, AGENT, OPPONENT = objects.GAMES['Pong'].colours.values()


def _pong_like_frame():
  """210x160 frame: ball at rows 100-101 / cols 80-81, the agent's paddle at rows 60-75 /
  cols 140-143, no opponent; a score digit in the agent's colour above the field."""
  frame = np.zeros((210, 160, 3), np.uint8)
  frame[100:102, 80:82] = BALL
  frame[60:76, 140:144] = AGENT
  frame[2:10, 120:126] = AGENT  # score: outside the play rows, must be ignored
  frame[24:34] = BALL  # the top wall shares the ball's colour
  return frame


def test_locate_finds_boxes_inside_the_field_only():
  boxes = objects.locate(_pong_like_frame(), 'Pong')
  assert boxes == {'ball': (100, 80, 2, 2), 'agent paddle': (60, 140, 16, 4), 'opponent paddle': None}


def test_mass_uniform_and_peak_by_hand():
  """27x20 map over 210x160 (cells 7.78 x 8 px). Head 0 puts all its weight on the cell
  holding the ball (row 12: y 93.3-101.1; column 10: x 80-88); head 1 is uniform; head 2
  puts 0.5 on a far corner and 0.5 spread uniformly."""
  frame = _pong_like_frame()
  attention = np.full((3, 27, 20), 1.0 / 540)
  attention[0] = 0.0
  attention[0, 12, 10] = 1.0
  attention[2] = 0.5 / 540
  attention[2, 0, 0] += 0.5
  results = objects.object_attention(attention[None], frame[None], 'Pong', margin=0)
  ball = results['ball']
  # Of box rows [100, 102), cell 12 holds [100, 101.11): 1.11 of its 7.78 rows; of columns
  # [80, 82), cell 10 holds both: 2 of its 8 columns.
  cell_height = 210 / 27
  share = ((13 * cell_height - 100) / cell_height) * (2 / 8)
  np.testing.assert_allclose(ball.mass[0], [share, 4 / (210 * 160), 0.5 * 4 / (210 * 160)], rtol=1e-6)
  np.testing.assert_allclose(ball.uniform, [4 / (210 * 160)])
  # Head 0's peak cell centre (97.2, 84) is not inside the 2x2 box; with a 4 px margin it is.
  assert ball.peak[0].tolist() == [0.0, 0.0, 0.0]
  grown = objects.object_attention(attention[None], frame[None], 'Pong', margin=4)['ball']
  assert grown.peak[0, 0] == 1.0 and grown.peak[0, 2] == 0.0
  summary = grown.summary()
  assert summary['lift'][1] == pytest.approx(1.0)  # uniform map: mass equals the area share
  assert summary['lift'][0] > 50
  # The opponent is absent: NaN rows, zero visible steps, and no table rows.
  assert results['opponent paddle'].steps_visible == 0
  assert np.isnan(results['opponent paddle'].mass).all()
  rows = objects.table_rows(results)
  assert [(r[0], r[1]) for r in rows] == [(n, h) for n in ('ball', 'agent paddle') for h in range(3)]


def test_pong_colours_match_real_frames():
  """After 150 no-op steps of real Pong, all three objects are found where the game draws them."""
  env = rollout.make_env('Pong', 1, 0)
  step = env.reset()
  for _ in range(150):
    step = env.step(np.zeros(1, np.int32))
  boxes = objects.locate(step.observation[0], 'Pong')
  env.close()
  y, x, h, w = boxes['agent paddle']
  assert (x, w) == (140, 4) and 15 <= h <= 18 and 34 <= y < 194
  y, x, h, w = boxes['opponent paddle']
  assert (x, w) == (16, 4) and 15 <= h <= 18
  y, x, h, w = boxes['ball']
  assert 34 <= y < 194 and h <= 8 and w <= 4  # max-pooled frames may show the ball twice


def test_attention_objects_command(tmp_path, capsys):
  assert cli.main(['attention-objects', f'--out={tmp_path}', '--steps=12']) == 0
  out = capsys.readouterr().out
  assert 'agent paddle (visible 12 steps' in out  # the agent's paddle never leaves the screen
  with open(tmp_path / 'attention_objects.csv') as f:
    rows = list(csv.DictReader(f))
  agent_rows = [r for r in rows if r['object'] == 'agent paddle']
  assert [int(r['head']) for r in agent_rows] == [0, 1, 2, 3]
  for row in rows:
    assert 0 <= float(row['mass']) <= 1 and 0 < float(row['uniform_mass']) < 1
  assert (tmp_path / 'attention_objects.png').stat().st_size > 5000


def test_area_resize_matrix_by_hand():
  """5 -> 2 pixels: each output averages 2.5 inputs, the middle one split half and half."""
  np.testing.assert_allclose(rollout.area_resize_matrix(5, 2),
                             [[0.4, 0.4, 0.2, 0, 0], [0, 0, 0.2, 0.4, 0.4]], atol=1e-12)
  assert rollout.gray_84(np.full((210, 160, 3), 200, np.uint8)) == pytest.approx(np.full((84, 84), 200.0))


def test_rgb_twin_follows_a_gray_game_and_catches_another():
  """Same seed and actions: the twin's RGB frames are the gray agent's game, step for step;
  a twin with another seed is caught (its frames would put the objects elsewhere)."""
  settings = rollout.EnvSettings('Pong', light_observation=True)
  for twin_seed, steps in ((0, 120), (4, 60)):
    env, twin = rollout.make_env(settings, 1, seed=0), rollout.RGBTwin(settings, twin_seed)
    step, actions = env.reset(), np.random.default_rng(1).integers(0, 6, steps)
    try:
      if twin_seed != 0:
        with pytest.raises(RuntimeError, match="the RGB twin left the agent's game at step"):
          for action in actions:
            twin.follow(step.observation[0, ..., 0], int(action))
            step = env.step(np.array([action], np.int32))
        continue
      for action in actions:
        frame = twin.follow(step.observation[0, ..., 0], int(action))
        assert frame.shape == (210, 160, 3)
        step = env.step(np.array([action], np.int32))
      assert twin.steps == steps
      boxes = objects.locate(frame, 'Pong')
      assert boxes['agent paddle'] is not None and boxes['agent paddle'][1] == 140
    finally:
      env.close()
      twin.close()


def test_attention_objects_command_on_a_gray_checkpoint(tmp_path, capsys):
  """A checkpoint trained on gray 84x84 frames: its objects come from the RGB twin."""
  config = NetworkConfig(**rollout.SMALL_NETWORK)
  state = learner_core.init_training_state(make_network(config, 6, (84, 84, 1)),
                                           learner_core.LearnerConfig(), jax.random.PRNGKey(2))
  checkpoint_lib.save(str(tmp_path / 'run' / 'checkpoints'), 5, state, network_config=config,
                      config={'env': {'name': 'atari', 'game': 'Pong', 'light_observation': True}})
  assert cli.main(['attention-objects', f'--checkpoint={tmp_path}/run', f'--out={tmp_path}/out',
                   '--steps=12']) == 0
  out = capsys.readouterr().out
  assert 'agent paddle (visible 12 steps' in out
  with open(tmp_path / 'out' / 'attention_objects.csv') as f:
    rows = list(csv.DictReader(f))
  assert {int(r['head']) for r in rows if r['object'] == 'agent paddle'} == {0, 1, 2, 3}


@pytest.mark.parametrize('args,fragment', [
    (['--game=Breakout'], "no object colours for game 'Breakout'; games with a table: ['Pong']"),
    (['--margin=-1'], '--margin must be >= 0 pixels, got -1'),
    (['--steps=0'], '--steps must be >= 1, got 0'),
])
def test_attention_objects_bad_input(tmp_path, capsys, args, fragment):
  assert cli.main(['attention-objects', f'--out={tmp_path}/out'] + args) == 2
  errors = [l for l in capsys.readouterr().err.splitlines() if l.startswith('error:')]
  assert len(errors) == 1 and fragment in errors[0], errors
  assert not (tmp_path / 'out').exists()
