"""`python -m s3ta.analysis.curves` on hand-written metrics: x axes, smoothing, CSV, PNG, errors."""

import csv
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from s3ta.analysis import curves

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _learner(t, frames, seconds, version, **extra):
  return dict(time=t, label='learner', step=version, frames=frames, learner_steps=version,
              learner_frames=frames, param_version=version, train_seconds=seconds, **extra)


def _actor(t, i, frames, episodes, mean):
  return dict(time=t, label=f'actor_{i}', step=frames, frames=frames, window_episodes=episodes,
              window_return_mean=mean)


def _evaluation(t, version, mean, episodes, frames=None):
  record = dict(time=t, label='evaluator', step=version, param_version=version, mean_return=mean,
                episodes=episodes, truncated=0)
  if frames is not None:
    record['frames'] = frames
  return record


def _write(workdir, records, tail=''):
  workdir.mkdir()
  lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
  (workdir / 'metrics.jsonl').write_text('\n'.join(lines) + '\n' + tail)
  return str(workdir)


# Learner (t, frames, s, version): (1010, 1000, 10, 10), (1020, 3000, 20, 30), (1030, 4000, 30, 40).
PLAIN = [
    _evaluation(1000, 0, -1.0, 10, frames=0),
    _actor(1015, 1, 700, 2, 2.0),  # written before the earlier window below: order is by time
    _actor(1005, 0, 500, 4, -1.0),  # before the first learner record: 0 frames, 0 s
    _learner(1010, 1000, 10.0, 10),
    _actor(1012, 1, 600, 0, None),  # no episodes: no point
    _learner(1020, 3000, 20.0, 30),
    _evaluation(1025, 20, 1.5, 10),  # no frames field: version 20 -> 2000 frames (by time: 3500)
    _actor(1028, 0, 900, 10, 0.5),
    _learner(1030, 4000, 30.0, 40, final=1),
    'not json',
    '[1, 2]',
    _evaluation(1031, 40, None, 0),  # no return: no point
]
# Resumed at t ~ 2990: actor frames restart, learner counters continue from the checkpoint.
RESUMED = [
    _learner(2010, 1000, 10.0, 10),
    _actor(2012, 0, 1200, 2, 1.0),
    _learner(2020, 2000, 20.0, 20, final=1),
    _evaluation(3000, 20, 3.0, 5, frames=2000),  # by time it would be 2980 frames; wall 29.8 s
    _actor(3020, 0, 500, 3, 4.0),  # actor frames 500, learner frames 3000
    _learner(3020, 3000, 30.0, 30),
    _actor(3030, 0, 1000, 4, 0.0),
    _learner(3040, 5000, 40.0, 50),
    _evaluation(3045, 50, 2.0, 5),  # after the last learner record: its frames and seconds
]
PARTIAL_TAIL = '{"time": 3050, "label": "evaluator", "mean_ret'


@pytest.fixture
def workdirs(tmp_path):
  return (_write(tmp_path / 'plain', PLAIN, tail=PARTIAL_TAIL),
          _write(tmp_path / 'resumed', RESUMED))


def test_smoothed_return_is_the_mean_of_the_last_n_episodes_across_windows():
  counts, means = [4, 2, 10], [-1.0, 2.0, 0.5]
  returns, averaged = curves.smoothed_returns(counts, means, 5)
  # 4 x -1; then 3 x -1 + 2 x 2 (one episode of the first window dropped); then 5 x 0.5.
  np.testing.assert_allclose(returns, [-1.0, 0.2, 0.5])
  np.testing.assert_array_equal(averaged, [4, 5, 5])
  returns, averaged = curves.smoothed_returns(counts, means, 100)
  np.testing.assert_allclose(returns, [-1.0, 0.0, 5.0 / 16])  # everything so far
  np.testing.assert_array_equal(averaged, [4, 6, 16])
  returns, _ = curves.smoothed_returns(counts, means, 1)
  np.testing.assert_allclose(returns, means)


def test_x_mapping_interpolates_learner_counters_over_time_and_versions(workdirs):
  records = curves.load_records(workdirs[0])
  assert len(records) == len(PLAIN) - 2  # 'not json', '[1, 2]' and the partial last line skipped
  track = curves.learner_track(records)
  frames, seconds = curves.x_at_times(track, [999, 1005, 1010, 1015, 1028, 1030, 5000])
  np.testing.assert_allclose(frames, [0, 0, 1000, 2000, 3800, 4000, 4000])
  np.testing.assert_allclose(seconds, [0, 0, 10, 15, 28, 30, 30])
  # Versions: (0, 0) first, then the learner records' (10, 1000), (30, 3000), (40, 4000).
  np.testing.assert_allclose(curves.frames_at_versions(track, [0, 5, 10, 20, 40, 99]),
                             [0, 500, 1000, 2000, 4000, 4000])
  assert curves.learner_track([r for r in records if r['label'] != 'learner']) is None


def test_training_and_evaluation_points(workdirs):
  plain = curves.load_run(workdirs[0], 'plain', smooth_episodes=5)
  np.testing.assert_allclose(plain.train.frames, [0, 2000, 3800])
  np.testing.assert_allclose(plain.train.wall_minutes, [0, 15 / 60, 28 / 60])
  np.testing.assert_allclose(plain.train.returns, [-1.0, 0.2, 0.5])
  np.testing.assert_allclose(plain.evals.frames, [0, 2000])  # own frames; version 20 -> 2000
  np.testing.assert_allclose(plain.evals.wall_minutes, [0, 25 / 60])
  np.testing.assert_allclose(plain.evals.returns, [-1.0, 1.5])
  assert (plain.final_frames, plain.final_wall_minutes) == (4000, 0.5)

  resumed = curves.load_run(workdirs[1], 'resumed', smooth_episodes=5)
  # Actor frames restarted at 500 after the resume; the x axis follows the learner.
  np.testing.assert_allclose(resumed.train.frames, [1200, 3000, 4000])
  np.testing.assert_allclose(resumed.train.wall_minutes, [12 / 60, 30 / 60, 35 / 60])
  np.testing.assert_allclose(resumed.train.returns, [1.0, (2 * 1.0 + 3 * 4.0) / 5, 4.0 / 5])
  # The first evaluation after the resume: its own frames (2000, not 2980 by time); wall
  # interpolated across the downtime (20 s at t=2020, 30 s at t=3020).
  np.testing.assert_allclose(resumed.evals.frames, [2000, 5000])
  np.testing.assert_allclose(resumed.evals.wall_minutes, [29.8 / 60, 40 / 60])


def test_max_frames_shows_a_run_as_if_it_had_stopped_at_that_budget(workdirs, tmp_path, capsys):
  # The first learner record with >= 2500 frames is at t=1020 (3000 frames, 20 s): later
  # actor windows are left out, and the run ends there. The evaluation at t=1025 came after,
  # of version 20's parameters (2000 frames): kept, at its frames and the cut's wall time.
  plain = curves.load_run(workdirs[0], 'plain', smooth_episodes=5, max_frames=2500)
  np.testing.assert_allclose(plain.train.frames, [0, 2000])
  np.testing.assert_allclose(plain.train.returns, [-1.0, 0.2])
  np.testing.assert_allclose(plain.evals.returns, [-1.0, 1.5])
  np.testing.assert_allclose(plain.evals.frames, [0, 2000])
  np.testing.assert_allclose(plain.evals.wall_minutes, [0, 20 / 60])
  assert (plain.final_frames, plain.final_wall_minutes) == (3000, 20 / 60)
  # Cut at t=1010 (1000 frames): the same evaluation scored later parameters, so it is left out.
  early = curves.load_run(workdirs[0], 'plain', smooth_episodes=5, max_frames=1000)
  np.testing.assert_allclose(early.evals.returns, [-1.0])
  # A run cut where it stopped keeps the final evaluation its stop wrote (t=3045, version 50).
  at_stop = curves.load_run(workdirs[1], 'resumed', smooth_episodes=5, max_frames=5000)
  np.testing.assert_allclose(at_stop.evals.frames, [2000, 5000])
  np.testing.assert_allclose(at_stop.evals.returns, [3.0, 2.0])
  whole = curves.load_run(workdirs[0], 'plain', smooth_episodes=5)
  beyond = curves.load_run(workdirs[0], 'plain', smooth_episodes=5, max_frames=10**6)
  np.testing.assert_allclose(beyond.train.returns, whole.train.returns)  # never reached: all
  assert beyond.final_frames == whole.final_frames == 4000
  # Through the CLI, across a resume: the resumed run up to 3000 learner frames (t=3020).
  assert curves.main([workdirs[1], f'--out={tmp_path / "cut"}', '--smooth_episodes=5',
                      '--max_frames=3e3']) == 0
  assert capsys.readouterr().out.startswith(
      'resumed: 3,000 frames, 0.5 min | train return 2.8 (last 5 episodes) | '
      'eval return last 3, best 3 (1 evaluations)')


def _png_size(path):
  data = open(path, 'rb').read()
  assert data[:8] == b'\x89PNG\r\n\x1a\n' and data[12:16] == b'IHDR'
  return struct.unpack('>II', data[16:24])


def test_cli_writes_csv_png_and_summary(workdirs, tmp_path, capsys):
  prefix = str(tmp_path / 'compare')
  code = curves.main([*workdirs, f'--out={prefix}', '--labels=plain run,resumed',
                      '--smooth_episodes=5', '--title=Catch'])
  assert code == 0
  out = capsys.readouterr().out.splitlines()
  assert out == [
      'plain run: 4,000 frames, 0.5 min | train return 0.5 (last 5 episodes) | '
      'eval return last 1.5, best 1.5 (2 evaluations)',
      'resumed: 5,000 frames, 0.7 min | train return 0.8 (last 5 episodes) | '
      'eval return last 2, best 3 (2 evaluations)',
      f'Plot: {prefix}.png', f'CSV: {prefix}.csv']
  with open(prefix + '.csv', newline='') as f:
    rows = list(csv.reader(f))
  assert rows[0] == ['run', 'series', 'frames', 'wall_minutes', 'return', 'episodes']
  expected = [
      ('plain run', 'train', 0, 0.0, -1.0, 4), ('plain run', 'train', 2000, 0.25, 0.2, 5),
      ('plain run', 'train', 3800, 28 / 60, 0.5, 5),
      ('plain run', 'eval', 0, 0.0, -1.0, 10), ('plain run', 'eval', 2000, 25 / 60, 1.5, 10),
      ('resumed', 'train', 1200, 0.2, 1.0, 2), ('resumed', 'train', 3000, 0.5, 2.8, 5),
      ('resumed', 'train', 4000, 35 / 60, 0.8, 5),
      ('resumed', 'eval', 2000, 29.8 / 60, 3.0, 5), ('resumed', 'eval', 5000, 40 / 60, 2.0, 5)]
  assert len(rows) == 1 + len(expected)
  for row, (run, series, frames, minutes, ret, episodes) in zip(rows[1:], expected):
    assert row[:3] == [run, series, str(frames)] and int(row[5]) == episodes, row
    assert float(row[3]) == pytest.approx(minutes, abs=1e-4) and float(row[4]) == pytest.approx(ret)
  assert _png_size(prefix + '.png') == (1200, 450)
  assert os.path.getsize(prefix + '.png') < 150_000


def test_default_labels_are_workdir_basenames(workdirs, tmp_path, capsys):
  assert curves.main([workdirs[1] + '/', f'--out={tmp_path / "one.png"}']) == 0  # .png dropped
  out = capsys.readouterr().out
  assert out.startswith('resumed: 5,000 frames') and 'train return 1.556 (last 9 episodes)' in out
  assert os.path.exists(tmp_path / 'one.png') and os.path.exists(tmp_path / 'one.csv')


@pytest.mark.parametrize('case', ['missing', 'no_metrics', 'no_learner', 'labels', 'same_label',
                                  'smooth_zero', 'smooth_text', 'out_dir', 'max_frames', 'a_file'])
def test_bad_input_is_one_error_line_and_status_2(case, workdirs, tmp_path, capsys):
  out = str(tmp_path / 'plot')
  (tmp_path / 'empty').mkdir()
  only_actors = _write(tmp_path / 'actors', [r for r in PLAIN if isinstance(r, dict)
                                             and r['label'] != 'learner'])
  argv, named = {
      'missing': ([str(tmp_path / 'nope'), f'--out={out}'], str(tmp_path / 'nope')),
      'no_metrics': ([str(tmp_path / 'empty'), f'--out={out}'], 'no metrics.jsonl'),
      'a_file': ([workdirs[0] + '/metrics.jsonl', f'--out={out}'], 'metrics.jsonl' + "' is a file, not a "
                 'directory (expected a run directory with metrics.jsonl)'),
      'no_learner': ([only_actors, f'--out={out}'], 'no learner records'),
      'labels': ([*workdirs, '--labels=a', f'--out={out}'], "'a'"),
      'same_label': ([*workdirs, '--labels=a,a', f'--out={out}'], "'a'"),
      'smooth_zero': ([workdirs[0], '--smooth_episodes=0', f'--out={out}'], "'0'"),
      'smooth_text': ([workdirs[0], '--smooth_episodes=ten', f'--out={out}'], "'ten'"),
      'out_dir': ([workdirs[0], f'--out={tmp_path / "nowhere" / "plot"}'], 'nowhere'),
      'max_frames': ([workdirs[0], '--max_frames=1.5', f'--out={out}'], "'1.5'"),
  }[case]
  assert curves.main(argv) == 2
  captured = capsys.readouterr()
  lines = captured.err.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: ') and named in lines[0], lines
  if case == 'no_learner':
    assert only_actors in lines[0]
  assert captured.out == ''
  assert not os.path.exists(out + '.png') and not os.path.exists(out + '.csv')


def test_command_line_exit_status(tmp_path):
  result = subprocess.run([sys.executable, '-m', 's3ta.analysis.curves', str(tmp_path / 'nope'),
                           f'--out={tmp_path / "plot"}'], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
  assert result.returncode == 2
  errors = [line for line in result.stderr.splitlines() if line.startswith('error:')]
  assert len(errors) == 1 and str(tmp_path / 'nope') in errors[0], result.stderr


def test_seeds_sharing_a_label_give_mean_and_standard_error(workdirs, tmp_path, capsys):
  # Training curves (smooth 5): plain (0, -1.0), (2000, 0.2), (3800, 0.5);
  # resumed (1200, 1.0), (3000, 2.8), (4000, 0.8). Common frames: 1200 .. 3800.
  prefix = str(tmp_path / 'seeds')
  alone = _write(tmp_path / 'alone', PLAIN)
  assert curves.main([*workdirs, alone, '--labels=agent,agent,other', '--seeds',
                      '--smooth_episodes=5', f'--out={prefix}']) == 0
  out = capsys.readouterr().out.splitlines()
  # At 3800 frames plain has 0.5, resumed 2.8 - 0.8 * 2 = 1.2: mean 0.85, s.e.m. 0.35.
  assert out[0] == ('agent (2 seeds): 3,800 frames reached by all | train return 0.85 ± 0.35 '
                    '(s.e.m.) at them | each seed at its end: 0.5, 0.8')
  assert out[1].startswith('other (1 seed): 3,800 frames') and '0.5 ± 0 (s.e.m.)' in out[1]
  with open(prefix + '.csv', newline='') as f:
    rows = list(csv.reader(f))
  assert {row[0] for row in rows[1:]} == {'agent #0', 'agent #1', 'other #0', 'agent', 'other'}
  mean = [row for row in rows if row[:2] == ['agent', 'train_mean']]
  sem = [row for row in rows if row[:2] == ['agent', 'train_sem']]
  assert len(mean) == len(sem) == 200 and mean[0][2] == '1200' and mean[-1][2] == '3800'
  assert float(mean[0][4]) == pytest.approx((-1.0 + 1.2 * 0.6 + 1.0) / 2)  # -0.28 and 1.0
  assert float(sem[-1][4]) == pytest.approx(0.35) and mean[-1][5] == '2'
  assert _png_size(prefix + '.png') == (1200, 450)
  # Without --seeds a shared label is still an error, and it names the way out.
  assert curves.main([*workdirs, '--labels=agent,agent', f'--out={prefix}2']) == 2
  assert '--seeds' in capsys.readouterr().err
