"""`python -m launch.fork`: a checkpoint and the metrics written up to it, copied; bad input."""

import json
import os
import subprocess
import sys

import numpy as np

from launch import fork
from s3ta.utils import checkpoint as checkpoint_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _source(tmp_path):
  """A workdir with ckpt_4 and ckpt_8, and records before, between and after them."""
  workdir = str(tmp_path / 'trunk')
  directory = checkpoint_lib.checkpoint_dir(workdir)
  times = {}
  for step in (4, 8):
    path = checkpoint_lib.save(directory, step, {'w': np.full(3, step, np.float32)},
                               counters={'learner_steps': step})
    with open(os.path.join(path, checkpoint_lib.METADATA_FILE)) as f:
      times[step] = json.load(f)['time']
  records = [dict(time=times[4] - 1, label='learner', learner_steps=3),
             dict(time=times[4], label='actor_0', frames=10),
             dict(time=times[4] + 1e-3, label='learner', learner_steps=5),
             dict(time=times[4] - 0.5, label='learner', learner_steps=4, final=1)]
  with open(os.path.join(workdir, 'metrics.jsonl'), 'w') as f:
    f.write('\n'.join(json.dumps(r) for r in records) + '\n{"time": 1, "lab')  # a partial line
  return workdir


def test_fork_copies_the_checkpoint_and_the_records_up_to_it(tmp_path):
  source = _source(tmp_path)
  destination = str(tmp_path / 'fork')
  done = subprocess.run([sys.executable, '-m', 'launch.fork', f'--from={source}', '--step=4',
                         f'--to={destination}'], cwd=REPO, capture_output=True, text=True, check=True)
  assert '2 metrics records kept' in done.stdout
  assert [s for s, _ in checkpoint_lib.list_checkpoints(checkpoint_lib.checkpoint_dir(destination))] == [4]
  restored = checkpoint_lib.restore(checkpoint_lib.checkpoint_dir(destination),
                                    {'w': np.zeros(3, np.float32)})
  assert restored.step == 4 and restored.state['w'].tolist() == [4.0, 4.0, 4.0]
  with open(os.path.join(destination, 'metrics.jsonl')) as f:
    kept = [json.loads(line) for line in f]
  assert [(r['label'], r.get('learner_steps')) for r in kept] == [('learner', 3), ('actor_0', None)]
  assert len(checkpoint_lib.list_checkpoints(checkpoint_lib.checkpoint_dir(source))) == 2  # untouched


def test_bad_forks_exit_2_and_write_nothing(tmp_path, capsys):
  source = _source(tmp_path)
  taken = tmp_path / 'taken'
  (taken / 'checkpoints').mkdir(parents=True)
  cases = [(['--step=5', f'--to={tmp_path / "a"}'], 'has no complete checkpoint ckpt_5; available '
                                                    'steps: [4, 8]'),
           (['--step=four', f'--to={tmp_path / "b"}'], "--step must be an integer checkpoint step, "
                                                      "got 'four'"),
           (['--step=8', f'--to={taken}'], 'already holds a run')]
  cases.append(([f'--from={tmp_path / "none"}', '--step=4', f'--to={tmp_path / "c"}'],
                'is not a directory'))
  a_file = tmp_path / 'a_file'
  a_file.write_text('kept')
  cases.append((['--step=4', f'--to={a_file}'], 'is a file; fork into a new or empty directory'))
  for argv, message in cases:  # in process (the CLI path is tested above)
    if not argv[0].startswith('--from'):
      argv = [f'--from={source}', *argv]
    assert fork.main(argv) == 2
    out, err = capsys.readouterr()
    assert err.startswith('error: ') and message in err and out == '', err
  assert not any((tmp_path / name).exists() for name in 'abc') and a_file.read_text() == 'kept'
  assert os.listdir(taken) == ['checkpoints'] and not os.listdir(taken / 'checkpoints')
  assert fork.trunk_lines(source, 0.0) == []


def test_a_corrupt_checkpoint_is_not_forked(tmp_path, capsys):
  source = _source(tmp_path)
  state = os.path.join(checkpoint_lib.checkpoint_dir(source), 'ckpt_8', checkpoint_lib.STATE_FILE)
  with open(state, 'r+b') as f:
    f.truncate(5)  # as a disk that filled up mid-write would leave it
  assert fork.main([f'--from={source}', '--step=8', f'--to={tmp_path / "d"}']) == 2
  err = capsys.readouterr().err
  assert err.startswith('error: --step=8: Checkpoint ') and 'ckpt_8 is corrupt' in err, err
  assert err.rstrip().endswith(f"Other steps of {source!r}: [4]."), err
  assert not (tmp_path / 'd').exists()
