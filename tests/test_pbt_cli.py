"""`python -m launch.pbt` rejects bad PBT configs before launching anything (exit 2, clear message)."""

import os
import subprocess
import sys

import pytest

import launcher_runs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_pbt(tmp_path, *overrides):
  workdir = tmp_path / 'run'
  return subprocess.run([sys.executable, '-m', 'launch.pbt', '--config=experiments/pbt_smoke.py',
                         f'--workdir={workdir}', *overrides], cwd=ROOT, capture_output=True, text=True,
                        timeout=300), workdir


BAD_CONFIGS = [
    ('--config.population_size=1', 'population_size must be an integer >= 2, got 1'),
    ("--config.pbt.evolve=('learning_rate','momentum')", "Unknown PBT hyperparameter name(s) ['momentum']"),
    ('--config.pbt.ready_interval_frames=0', 'ready_interval_frames must be > 0, got 0'),
    ('--config.pbt.ready_interval_frames=-100', 'ready_interval_frames must be > 0, got -100'),
    ("--config.pbt.exploit=tournament", "Unknown PBT exploit strategy 'tournament'"),
    ("--config.games=Pongg", "Unknown Atari game(s) ['Pongg']"),
    ('--config.pbt_init_ranges.learning_rate=(1e-3,)',
     'config.pbt_init_ranges.learning_rate must be a pair (low, high), got (0.001,)'),
]


@pytest.fixture(scope='module')
def bad_config_runs(tmp_path_factory):
  """BAD_CONFIGS[1:] in one process (tests/launcher_runs.py); BAD_CONFIGS[0] runs as `python -m`."""
  root = tmp_path_factory.mktemp('bad_pbt')
  return launcher_runs.run_all_but_first(
      'launch.pbt', [(root / str(i) / 'run', ['--config=experiments/pbt_smoke.py',
                                              f'--workdir={root / str(i) / "run"}', override])
                     for i, (override, _) in enumerate(BAD_CONFIGS)])


@pytest.mark.parametrize('case', range(len(BAD_CONFIGS)), ids=[o for o, _ in BAD_CONFIGS])
def test_bad_pbt_config_exits_nonzero_with_message(tmp_path, bad_config_runs, case):
  override, message = BAD_CONFIGS[case]
  result, workdir = run_pbt(tmp_path, override) if case == 0 else bad_config_runs[case]
  assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
  assert 'error: invalid config:' in result.stderr and message in result.stderr, result.stderr[-2000:]
  assert 'Traceback' not in result.stderr
  assert not workdir.exists()  # nothing was created or launched


def test_actor_episode_hook_reports_returns_and_adds_per_game_fields():
  """Pong reference scores: random -20.7, human 14.6, so hns(r) = (r + 20.7) / 35.3."""
  import types  # pylint: disable=g-import-not-at-top
  from launch import pbt  # pylint: disable=g-import-not-at-top
  sent = []
  client = types.SimpleNamespace(futures=types.SimpleNamespace(
      report_episodes=lambda game, returns: sent.append((game, returns))))
  fields = pbt.report_episodes('Pong', client, lambda: False, [-21, -19])
  assert sent == [('Pong', [-21.0, -19.0])]
  assert fields == {'game_return_mean': -20.0,
                    'game_hns_mean': pytest.approx((-0.3 + 1.7) / 2 / 35.3)}
  assert pbt.report_episodes('Pong', client, lambda: True, [14.6]) == {  # stopping: no report
      'game_return_mean': 14.6, 'game_hns_mean': pytest.approx(1.0)}
  assert len(sent) == 1

  def unreachable(game, returns):
    raise RuntimeError('learner gone')
  broken = types.SimpleNamespace(futures=types.SimpleNamespace(report_episodes=unreachable))
  assert pbt.report_episodes('Pong', broken, lambda: False, [-20.7])['game_hns_mean'] == 0.0


def test_a_workdir_that_is_a_file_is_refused_before_launching(tmp_path):
  path = tmp_path / 'run'
  path.write_text('not a directory')
  result = subprocess.run([sys.executable, '-m', 'launch.pbt', '--config=experiments/pbt_smoke.py',
                           f'--workdir={path}'], cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert result.returncode == 2, result.stderr[-2000:]
  errors = [line for line in result.stderr.splitlines() if line.startswith('error:')]
  assert errors == [f"error: workdir '{path}' is not a writable directory (File exists)."], (
      result.stderr[-2000:])
  assert 'Traceback' not in result.stderr
  assert path.read_text() == 'not a directory'
