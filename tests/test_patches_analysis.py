"""Paper 004's analysis views: highlighted patches and the top-5 % selection against hand-computed
values, and the three subcommands end to end on a real (tiny) evolution checkpoint."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest
from PIL import Image

from s3ta.analysis import cli, patches
from s3ta.evolution import controller
from s3ta.networks.attention_agent import AttentionAgentConfig
from tests.test_evolution import _config, _inline_dispatcher

pytest.importorskip('vizdoom')


def test_top_patches_are_whitened_by_importance_and_the_rest_untouched():
  config = AttentionAgentConfig(image_size=12, patch_size=4, stride=4, top_k=2)  # 3 x 3 patches
  frame = np.full((12, 12, 3), 100, np.uint8)
  importance = np.array([0, 0, 0, 0, 4.0, 0, 0, 0, 2.0])
  image = patches.highlight_patches(frame, np.array([4, 8]), importance, config)
  # patch 4 is rows/cols 4..7 (alpha 0.85), patch 8 rows/cols 8..11 (alpha 0.6)
  assert (image[4:8, 4:8] == int(0.15 * 100 + 0.85 * 255)).all()
  assert (image[8:12, 8:12] == int(0.4 * 100 + 0.6 * 255)).all()
  untouched = np.ones((12, 12), bool)
  untouched[4:8, 4:8] = untouched[8:12, 8:12] = False
  assert (image[untouched] == 100).all()


def test_top_quantile_keeps_each_steps_largest_importances():
  importance = np.array([np.arange(20.0), np.arange(20.0)[::-1] * 10])
  np.testing.assert_array_equal(np.sort(patches.importance_in_top_quantile(importance)),
                                [19.0, 190.0])  # the top 5 % of 20 patches is one per step


@pytest.fixture(scope='module')
def evolved_workdir(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp('evolved'))
  controller.Controller(_config(max_generations=1), workdir, _inline_dispatcher(),
                        log=lambda line: None, tensorboard=False).run()
  return workdir


def test_the_three_subcommands_write_their_outputs(evolved_workdir, tmp_path, monkeypatch):
  out = str(tmp_path / 'out')
  written = []
  save_gif = patches.render.save_gif
  monkeypatch.setattr(patches.render, 'save_gif',
                      lambda frames, *a, **k: written.append(frames) or save_gif(frames, *a, **k))
  assert cli.main(['patch-video', f'--checkpoint={evolved_workdir}', f'--out={out}',
                   '--max-steps=12', '--every=3', '--which=best_eval']) == 0
  assert len(written) == 1 and len(written[0]) == 4  # steps 0, 3, 6 and 9 of 12
  # Each frame: the 96 x 96 observation and its highlighted copy at 3x, 4 px apart, under a banner.
  assert {frame.shape[1:] for frame in written[0]} == {(2 * 3 * 96 + 4, 3)}
  assert Image.open(os.path.join(out, 'patches_none_seed0.gif')).size[0] == 2 * 3 * 96 + 4
  assert cli.main(['patch-importance', f'--checkpoint={evolved_workdir}', f'--out={out}',
                   '--max-steps=10', '--episodes=2', '--which=best']) == 0
  rows = open(os.path.join(out, 'patch_importance.csv')).read().splitlines()
  assert rows[0].startswith('episode,seed,return') and len(rows) == 1 + 2 * 40
  assert cli.main(['generalisation', f'--checkpoint={evolved_workdir}', f'--out={out}',
                   '--max-steps=15', '--episodes=2', '--modifications=none,hovering_text']) == 0
  table = open(os.path.join(out, 'generalisation.md')).read()
  assert '| this agent | 15 ± 0 | 15 ± 0 |' in table  # nobody dies within 15 tics
  assert '| 004 (Table 4) | 1125 ± 589 | 1035 ± 627 |' in table


@pytest.mark.parametrize('args, give_checkpoint, message', [
    (['patch-video'], False, 'needs --checkpoint'),
    (['patch-video', '--checkpoint=/nonexistent'], False, 'no evolution checkpoint'),
    (['generalisation', '--modifications=none,snow'], True, "Unknown modification 'snow'"),
    (['patch-importance', '--episodes=0'], True, '--episodes must be >= 1'),
])
def test_bad_input_is_one_error_line_and_exit_2(evolved_workdir, tmp_path, capsys, args,
                                                give_checkpoint, message):
  if give_checkpoint:
    args = args + [f'--checkpoint={evolved_workdir}']
  assert cli.main(args + [f'--out={tmp_path}']) == 2
  assert message in capsys.readouterr().err


def test_sigterm_mid_play_closes_the_vizdoom_engines(evolved_workdir, tmp_path):
  process = subprocess.Popen(
      [sys.executable, '-m', 's3ta.analysis', 'generalisation', f'--checkpoint={evolved_workdir}',
       f'--out={tmp_path}', '--episodes=400'], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  try:
    deadline = time.monotonic() + 120
    engines = []
    while len(engines) < 4 and time.monotonic() < deadline and process.poll() is None:
      time.sleep(0.5)
      engines = [p for p in psutil.Process(process.pid).children() if p.name() == 'vizdoom']
    assert len(engines) == 4, process.stderr.read() if process.poll() is not None else engines
    time.sleep(1.0)  # playing
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 128 + signal.SIGTERM
    time.sleep(0.5)
    for engine in engines:  # gone, or exited and waiting to be reaped: none still running
      assert not engine.is_running() or engine.status() == psutil.STATUS_ZOMBIE, engine
  finally:
    if process.poll() is None:
      process.kill()
