"""End-to-end tests of `python -m s3ta.analysis` on real EnvPool Pong with a small network.

The subcommands run in-process through `cli.main` (one interpreter, a few seconds
each); one run and the bad-input cases go through a real subprocess to check the
module entry point, the single error line and the exit status.
"""

import csv
import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from PIL import Image

import launcher_runs
from s3ta.analysis import cli, render, rollout
from s3ta.learning import learner_core
from s3ta.networks import NetworkConfig, make_network
from s3ta.utils import checkpoint as checkpoint_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _gif(path):
  image = Image.open(path)
  return image.n_frames, image.size


def _run(argv, capsys):
  code = cli.main(argv)
  out = capsys.readouterr()
  assert code == 0, out.err
  return out.out


def test_save_gif_frame_count_and_size(tmp_path):
  frames = [np.full((30, 50, 3), i * 40, np.uint8) for i in range(5)]
  path = render.save_gif(frames, str(tmp_path / 'x.gif'), fps=5)
  assert _gif(path) == (5, (50, 30))
  with pytest.raises(ValueError, match='differ in size'):
    render.save_gif(frames + [np.zeros((31, 50, 3), np.uint8)], str(tmp_path / 'y.gif'))


def test_attention_video_and_what_where(tmp_path, capsys):
  out = _run(['attention-video', f'--out={tmp_path}', '--steps=6', '--every=2'], capsys)
  assert 'attention_video.gif' in out
  count, (width, height) = _gif(tmp_path / 'attention_video.gif')
  assert count == 3  # steps 0, 2, 4
  assert width == 5 * 160 + 4 * 4 and height > 210  # frame + 4 heads, with captions
  assert Image.open(tmp_path / 'attention_last_frame.png').size == (width, height)

  _run(['what-where', f'--out={tmp_path}', '--steps=4'], capsys)
  count, size = _gif(tmp_path / 'what_where.gif')
  assert count == 4 and size[0] == 5 * 160 + 4 * 4
  maps = np.load(tmp_path / 'what_where.npz')
  assert maps['contribution'].shape == (4, 4, 27, 20)
  assert np.abs(maps['contribution']).max() <= np.log(10) * maps['attention'].max() + 1e-6


def test_saliency_and_attention_stats(tmp_path, capsys):
  _run(['saliency', f'--out={tmp_path}', '--warmup=3', '--stride=30', '--batch=16'], capsys)
  maps = np.load(tmp_path / 'saliency.npz')
  assert maps['policy'].shape == maps['value'].shape == (7, 5)  # centres 15, 45, ... < 210, < 160
  assert maps['attention'].shape == (4, 27, 20)
  assert Image.open(tmp_path / 'saliency.png').size[0] == 7 * 160 + 6 * 4

  _run(['attention-stats', f'--out={tmp_path}', '--max-steps=5'], capsys)
  with open(tmp_path / 'attention_entropy.csv') as f:
    rows = list(csv.reader(f))
  assert len(rows) == 6 and len(rows[0]) == 5
  entropies = np.array(rows[1:], float)[:, 1:]
  assert np.all(entropies > 0) and np.all(entropies <= np.log(27 * 20) + 1e-6)
  for name in ('attention_marginals.png', 'attention_entropy.png'):
    assert Image.open(tmp_path / name).size[0] > 300


def test_inject_and_hard_attention(tmp_path, capsys):
  out = _run(['inject', f'--out={tmp_path}', '--before=3', '--inject-steps=2', '--after=2',
              '--sprite-box=34,16,16,8', '--sprite-step=1', '--inject-at=100,60', '--strip=4'], capsys)
  assert 'inject_strip.png' in out
  assert _gif(tmp_path / 'inject.gif')[0] == 7
  with open(tmp_path / 'inject.csv') as f:
    rows = list(csv.DictReader(f))
  assert [int(r['injected']) for r in rows] == [0, 0, 0, 1, 1, 0, 0]
  Image.new('RGB', (6, 4), (255, 0, 0)).save(tmp_path / 'sprite.png')
  _run(['inject', f'--out={tmp_path}/png', '--before=1', '--inject-steps=1', '--after=0',
        f'--sprite-png={tmp_path}/sprite.png'], capsys)
  assert _gif(tmp_path / 'png' / 'inject.gif')[0] == 2

  out = _run(['hard-attention', f'--out={tmp_path}', '--episodes=1', '--thresholds=0,1',
              '--max-steps-per-episode=5'], capsys)
  assert 'threshold t' in out and 'cut' in out
  with open(tmp_path / 'hard_attention.csv') as f:
    rows = list(csv.DictReader(f))
  assert [float(r['threshold']) for r in rows] == [0.0, 1.0]
  assert all(int(r['episodes']) == 1 and int(r['steps']) == 5 and int(r['truncated']) == 1 for r in rows)


def _save_checkpoint(directory, num_actions, step):
  config = NetworkConfig(**rollout.SMALL_NETWORK)
  params = rollout.random_params(make_network(config, num_actions, rollout.ATARI_OBSERVATION_SHAPE), seed=2)
  state = learner_core.TrainingState(params, learner_core.make_optimizer(learner_core.LearnerConfig()).init(params),
                                     jnp.float32(0.01), jnp.int32(0))
  checkpoint_lib.save(directory, step, state, network_config=config)


def _assert_one_error_line(result, fragment):
  assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
  errors = [l for l in result.stderr.splitlines() if l.startswith('error:')]
  assert len(errors) == 1 and fragment in errors[0], result.stderr
  assert 'Traceback' not in result.stderr


def test_module_entry_point_bad_inputs(tmp_path):
  """The module entry point on bad inputs: one `error:` line, no traceback, exit status 2.

  Bad inputs: a missing checkpoint directory, a checkpoint of another network (4
  actions: trained on another game, not Pong's 6), an unknown game, a threshold
  outside [0, 1]. The first runs as `python -m s3ta.analysis`; the others run the
  same module entry one after another in a second process (tests/launcher_runs.py),
  to pay the TensorFlow import (3-4 s, via rlax) once. Nothing is written.
  """
  _save_checkpoint(str(tmp_path / 'other'), 4, step=1)
  bad = [
      (['hard-attention', '--thresholds=0,1.5'], 'outside [0, 1]'),
      (['what-where', f'--checkpoint={tmp_path}/other', '--game=Pong'], 'does not fit'),
      (['saliency', '--checkpoint=/no/such/dir'], 'does not exist'),
      (['attention-video', '--game=NoSuchGame'], 'Unknown Atari game'),
  ]
  argv = [args + [f'--out={tmp_path}/out{i}'] for i, (args, _) in enumerate(bad)]
  env = dict(os.environ, JAX_PLATFORMS='cpu', TF_CPP_MIN_LOG_LEVEL='2')
  single = subprocess.Popen([sys.executable, '-m', 's3ta.analysis'] + argv[0], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  several = launcher_runs.run_each('s3ta.analysis', argv[1:], env=env, timeout=120)
  stdout, stderr = single.communicate(timeout=120)
  results = [subprocess.CompletedProcess(single.args, single.returncode, stdout, stderr)] + several
  for result, (_, fragment) in zip(results, bad):
    _assert_one_error_line(result, fragment)
  assert not any(os.path.exists(tmp_path / f'out{i}') for i in range(len(bad)))


def test_checkpoint_from_a_workdir(tmp_path, capsys, monkeypatch):
  for step in (3, 5):
    _save_checkpoint(str(tmp_path / 'run' / 'checkpoints'), 6, step=step)
  restored = []
  restore = rollout._restore_agent  # pylint: disable=protected-access
  monkeypatch.setattr(rollout, '_restore_agent',
                      lambda path, *a: restored.append(path) or restore(path, *a))
  out = _run(['attention-video', f'--checkpoint={tmp_path}/run', f'--out={tmp_path}/out', '--steps=2'], capsys)
  assert restored == [os.path.join(str(tmp_path), 'run', 'checkpoints', 'ckpt_5')]  # the workdir's newest
  assert f'wrote {tmp_path}/out/attention_video.gif' in out
  assert _gif(tmp_path / 'out' / 'attention_video.gif')[0] == 2


def test_attention_command_rejects_a_network_without_attention(tmp_path, capsys):
  config = NetworkConfig(kind='resnet', resnet_channels=(4, 4, 4), resnet_blocks=1, resnet_hidden=16)
  network = make_network(config, 6, rollout.ATARI_OBSERVATION_SHAPE)
  params = rollout.random_params(network)
  state = learner_core.TrainingState(params, learner_core.make_optimizer(learner_core.LearnerConfig()).init(params),
                                     jnp.float32(0.01), jnp.int32(0))
  checkpoint_lib.save(str(tmp_path), 2, state, network_config=config)
  assert cli.main(['attention-stats', f'--checkpoint={tmp_path}', f'--out={tmp_path}/out']) == 2
  err = capsys.readouterr().err
  assert [l for l in err.splitlines() if l.startswith('error:')] == [
      "error: attention-stats needs an attention network; this checkpoint is a 'resnet' network "
      'without attention.']
  # Saliency works on the baseline too (the paper compares both), without attention panels.
  _run(['saliency', f'--checkpoint={tmp_path}', f'--out={tmp_path}/sal', '--warmup=2', '--stride=60'], capsys)
  maps = np.load(tmp_path / 'sal' / 'saliency.npz')
  assert maps['policy'].shape == (3, 3) and maps['attention'].size == 0  # centres 30, 90, 150
  assert Image.open(tmp_path / 'sal' / 'saliency.png').size[0] == 3 * 160 + 2 * 4


@pytest.mark.parametrize('args,fragment', [
    (['inject', '--sprite-box=0,0,16,8', '--inject-at=200,0'], 'does not fit'),
    (['inject', '--sprite-box=0,0,16,8', '--sprite-step=30', '--before=30'], '--sprite-step'),
    (['inject'], 'give the sprite'),
    (['saliency', '--stride=0'], '--stride must be >= 1'),
])
def test_bad_options_fail_before_anything_runs(tmp_path, capsys, args, fragment):
  assert cli.main(args + [f'--out={tmp_path}/out']) == 2
  err = capsys.readouterr().err
  errors = [l for l in err.splitlines() if l.startswith('error:')]
  assert len(errors) == 1 and fragment in errors[0], err
  assert not os.path.exists(tmp_path / 'out')


def test_checkpoint_of_a_gray_84x84_run_plays_its_own_game_and_frames(tmp_path, capsys):
  """A 'cpu'/'smoke' run (light_observation) is played on gray 84x84 Breakout, as trained."""
  config = NetworkConfig(**rollout.SMALL_NETWORK)
  network = make_network(config, 4, (84, 84, 1))
  params = rollout.random_params(network)
  state = learner_core.TrainingState(params, learner_core.make_optimizer(learner_core.LearnerConfig()).init(params),
                                     jnp.float32(0.01), jnp.int32(0))
  experiment = {'env': {'game': 'Breakout', 'light_observation': True, 'full_action_space': False}}
  checkpoint_lib.save(str(tmp_path / 'checkpoints'), 5, state, network_config=config, config=experiment)
  _run(['attention-video', f'--checkpoint={tmp_path}', f'--out={tmp_path}/out', '--steps=2', '--scale=2'],
       capsys)
  count, (width, _) = _gif(tmp_path / 'out' / 'attention_video.gif')
  assert count == 2 and width == 5 * 168 + 4 * 4
  _run(['inject', f'--checkpoint={tmp_path}', f'--out={tmp_path}/inj', '--before=1', '--inject-steps=1',
        '--after=0', '--sprite-box=0,0,8,8', '--inject-at=70,70'], capsys)
  assert cli.main(['attention-video', f'--checkpoint={tmp_path}', '--game=Pong', f'--out={tmp_path}/x']) == 2
  assert 'trained on Breakout' in capsys.readouterr().err


def test_an_out_that_is_a_file_or_a_corrupt_metadata_file_is_one_error_line(tmp_path, capsys):
  _save_checkpoint(str(tmp_path / 'run' / 'checkpoints'), 6, step=3)
  a_file = tmp_path / 'a_file'
  a_file.write_text('kept')
  argv = ['attention-video', f'--checkpoint={tmp_path}/run', '--steps=1']
  assert cli.main(argv + [f'--out={a_file}']) == 2
  assert capsys.readouterr().err == (
      f"error: --out='{a_file}' is a file; give a directory (created if missing).\n")
  assert a_file.read_text() == 'kept'
  metadata = tmp_path / 'run' / 'checkpoints' / 'ckpt_3' / checkpoint_lib.METADATA_FILE
  metadata.write_text(metadata.read_text()[:100])  # as a disk that filled up would leave it
  assert cli.main(argv + [f'--out={tmp_path}/out']) == 2
  err = capsys.readouterr().err
  assert err.startswith(f'error: Checkpoint {tmp_path}/run/checkpoints/ckpt_3 is corrupt '
                        f'({checkpoint_lib.METADATA_FILE}: ') and 'move it out' in err, err
  assert len(err.splitlines()) == 1
