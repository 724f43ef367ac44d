"""`python -m s3ta.analysis.learner_stats` on hand-written metrics: bins, aggregates, errors."""

import csv
import math
import subprocess
import sys

import pytest

from s3ta.analysis import learner_stats
from tests.test_curves import ROOT, _actor, _evaluation, _learner, _write

# Learner (t, frames): (1010, 1000), (1020, 3000), (1030, 4000); by time, the actors' windows
# land at 0 frames (t 1005), 2000 (t 1015) and 3800 (t 1028), the evaluations at 0 and 2000.
RECORDS = [
    _evaluation(1000, 0, -1.0, 10, frames=0),
    _actor(1005, 0, 500, 4, -1.0),
    _learner(1010, 1000, 10.0, 10, **{'train/entropy': 1.0, 'train/grad_norm': 2.0}),
    _actor(1015, 1, 700, 2, 2.0),
    _learner(1020, 3000, 20.0, 30, **{'train/entropy': 1.6, 'train/grad_norm': 10.0},
             policy_lag=3.0),
    _evaluation(1025, 20, 1.5, 10),
    _actor(1028, 0, 900, 10, 0.5),
    _learner(1030, 4000, 30.0, 40, **{'train/entropy': 1.2, 'train/grad_norm': 4.0},
             policy_lag=1.0),
    _learner(1031, 3900, 31.0, 39, **{'train/entropy': 1.4, 'train/grad_norm': 6.0}),
]


def test_each_bin_holds_its_records_return_and_evaluations(tmp_path):
  workdir = _write(tmp_path / 'run', RECORDS)
  metrics = learner_stats.parse_metrics('entropy,grad_norm:max,policy_lag')
  header, rows = learner_stats.table(workdir, 2000, metrics)
  assert header == ['frames_from', 'train_return', 'evaluations', 'entropy', 'grad_norm:max',
                    'policy_lag']
  assert [row[0] for row in rows] == [0, 2000, 4000]
  assert rows[0][1:] == [-1.0, [-1.0], 1.0, 2.0, pytest.approx(math.nan, nan_ok=True)]
  # The last window in [2000, 4000): the mean of all 16 episodes, (-4 + 4 + 5) / 16.
  assert rows[1][1] == pytest.approx(0.3125) and rows[1][2] == [1.5]
  assert rows[1][3:] == pytest.approx([1.5, 10.0, 3.0])  # records at 3000 and 3900 frames
  assert math.isnan(rows[2][1]) and rows[2][2] == []
  assert rows[2][3:] == pytest.approx([1.2, 4.0, 1.0])


def test_cli_prints_the_table_writes_csv_and_rejects_bad_input(tmp_path, capsys):
  workdir = _write(tmp_path / 'run', RECORDS)
  out = tmp_path / 'stats.csv'
  done = subprocess.run([sys.executable, '-m', 's3ta.analysis.learner_stats', workdir,
                         '--bin_frames=2e3', '--metrics=entropy', f'--csv={out}'],
                        cwd=ROOT, capture_output=True, text=True, check=True)
  lines = done.stdout.splitlines()
  assert lines[0].split() == ['M', 'frames', 'train_return', 'evaluations', 'entropy']
  assert [line.split() for line in lines[1:4]] == [['0', '-1', '-1', '1'],
                                                   ['0.002', '0.3125', '1.5', '1.5'],
                                                   ['0.004', '1.2']]
  assert lines[4] == f'CSV: {out}'
  rows = list(csv.reader(out.open()))
  assert rows[0] == ['frames_from', 'train_return', 'evaluations', 'entropy']
  assert rows[2] == ['2000.0', '0.3125', '1.5', '1.5'] and rows[3] == ['4000.0', '', '', '1.2']
  for argv, message in [(['--bin_frames=0'], '--bin_frames must be a number of frames >= 1'),
                        (['--metrics=entropy:median'], "entry 'entropy:median' is not NAME"),
                        (['--metrics=foo'], "metric(s) ['foo'] are not in the learner records"),
                        (['--bins=3'], 'unrecognized arguments: --bins=3'),
                        ([f'--csv={tmp_path}/no_dir/x.csv'], f"--csv='{tmp_path}/no_dir/x.csv': its "
                         'directory does not exist')]:
    assert learner_stats.main([workdir, *argv]) == 2  # in process: the CLI path is tested above
    out, err = capsys.readouterr()
    assert out == '' and err.startswith('error: ') and message in err, err
