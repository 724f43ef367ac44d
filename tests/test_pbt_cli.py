"""`python -m launch.pbt` rejects bad PBT configs before launching anything (exit 2, clear message)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_pbt(tmp_path, *overrides):
  workdir = tmp_path / 'run'
  return subprocess.run([sys.executable, '-m', 'launch.pbt', '--config=experiments/pbt_smoke.py',
                         f'--workdir={workdir}', *overrides], cwd=ROOT, capture_output=True, text=True,
                        timeout=300), workdir


@pytest.mark.parametrize('override, message', [
    ('--config.population_size=1', 'population_size must be an integer >= 2, got 1'),
    ("--config.pbt.evolve=('learning_rate','momentum')", "Unknown PBT hyperparameter name(s) ['momentum']"),
    ('--config.pbt.ready_interval_frames=0', 'ready_interval_frames must be > 0, got 0'),
    ('--config.pbt.ready_interval_frames=-100', 'ready_interval_frames must be > 0, got -100'),
    ("--config.pbt.exploit=tournament", "Unknown PBT exploit strategy 'tournament'"),
    ("--config.games=Pongg", "Unknown Atari game(s) ['Pongg']"),
])
def test_bad_pbt_config_exits_nonzero_with_message(tmp_path, override, message):
  result, workdir = run_pbt(tmp_path, override)
  assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
  assert 'launch.pbt: invalid config:' in result.stderr and message in result.stderr, result.stderr[-2000:]
  assert 'Traceback' not in result.stderr
  assert not workdir.exists()  # nothing was created or launched
