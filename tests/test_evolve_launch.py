"""`launch.evolve` end to end: bad input is one line and exit 2; a real Launchpad program (controller
+ 2 courier workers, real VizDoom) and the single-machine mode evolve, resume, and leave a workdir
the curves tool reads."""

import json
import os
import subprocess
import sys

import pytest

import launcher_runs

from s3ta.analysis import curves

pytest.importorskip('vizdoom')
pytest.importorskip('cma')

TINY = ['--config.es.population_size=6', '--config.es.rollouts_per_candidate=2',
        '--config.task.max_steps=30', '--config.evaluator.every_generations=1',
        '--config.evaluator.rollouts=2', '--config.envs_per_worker=2']


TAKE_COVER = 'experiments/attention_agent.py:take_cover'


def _evolve(workdir, *args, config=TAKE_COVER, timeout=420):
  env = dict(os.environ, JAX_PLATFORMS='cpu')
  return subprocess.run([sys.executable, '-m', 'launch.evolve', f'--config={config}',
                         f'--workdir={workdir}', *args], capture_output=True, text=True,
                        timeout=timeout, env=env)


BAD_INPUTS = [
    # First: a real `python -m` (in one process after another config, ml_collections would load
    # this file into the same module object, which still holds the earlier get_config).
    ([], 'experiments/__init__.py', "--config file 'experiments/__init__.py' defines no get_config()"),
    ([], 'experiments/attention_agent.py:pong', "Unknown attention_agent task 'pong'"),
    ([], 'experiments/attention_agent.py:take_cover,fast',
     "Unknown attention_agent recipe 'take_cover,fast'; valid: TASK or one of"),
    (['--config.es.population_size=1'], None, 'config.es.population_size must be an integer >= 2, got 1'),
    (['--config.task.modification=snow'], None, "Unknown modification 'snow' for task 'take_cover'"),
    ([], 'experiments/attention_agnt.py',
     "--config file 'experiments/attention_agnt.py' does not exist; experiments/ holds atari_expert.py"),
]  # the other bad values: tests/test_evolution.py, in-process


@pytest.fixture(scope='module')
def bad_input_runs(tmp_path_factory):
  """BAD_INPUTS[1:] in one process (tests/launcher_runs.py); BAD_INPUTS[0] runs as `python -m`."""
  root = tmp_path_factory.mktemp('bad_evolve')
  return launcher_runs.run_all_but_first(
      'launch.evolve', [(root / str(i) / 'run', [f'--config={config or TAKE_COVER}',
                                                 f'--workdir={root / str(i) / "run"}', *args])
                        for i, (args, config, _) in enumerate(BAD_INPUTS)],
      env=dict(os.environ, JAX_PLATFORMS='cpu'))


@pytest.mark.parametrize('case', range(len(BAD_INPUTS)),
                         ids=['no_get_config', 'pong', 'recipe', 'population_size', 'modification', 'no_file'])
def test_bad_input_is_one_line_and_exit_2(tmp_path, bad_input_runs, case):
  args, config, message = BAD_INPUTS[case]
  if case == 0:
    workdir = tmp_path / 'run'
    result = _evolve(str(workdir), *args, config=config or TAKE_COVER, timeout=120)
  else:
    result, workdir = bad_input_runs[case]
  assert result.returncode == 2, result.stderr[-2000:]
  errors = [line for line in result.stderr.splitlines() if line.startswith('error:')]
  assert len(errors) == 1 and message in errors[0], result.stderr[-2000:]
  assert not os.path.exists(workdir / 'checkpoints')


@pytest.mark.distributed
def test_launchpad_program_evolves_and_its_workdir_is_read_by_the_curves_tool(tmp_path):
  workdir = str(tmp_path / 'run')
  result = _evolve(workdir, '--launch_type=local_mp', '--config.max_generations=2', *TINY)
  assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
  summary = json.load(open(os.path.join(workdir, 'summary.json')))
  assert summary['generations'] == 2 and summary['stop_reason'] == 'max_generations (2)'
  assert summary['worker_deaths'] == 0 and summary['final_eval_mean'] is not None
  # 6 candidates x 2 episodes of 30 steps per generation, plus 2 x 2 evaluation episodes + final
  assert summary['frames'] >= 2 * 6 * 2 * 1 and summary['frames'] <= 2 * 6 * 2 * 30 + 3 * 2 * 30
  run = curves.load_run(workdir, 'evolve', smooth_episodes=12)
  assert len(run.train) == 2 and len(run.evals) == 3
  assert run.final_frames > 0 and all(r <= 30 for r in run.train.returns)


def test_single_machine_mode_resumes_from_its_checkpoint(tmp_path):
  workdir = str(tmp_path / 'run')
  first = _evolve(workdir, '--config.max_generations=1', *TINY)
  assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
  assert 'new run: take_cover (none), 3,633 parameters' in first.stdout
  second = _evolve(workdir, '--config.max_generations=2', *TINY)
  assert second.returncode == 0, (second.stdout + second.stderr)[-3000:]
  assert 'resumed at generation 1' in second.stdout
  assert json.load(open(os.path.join(workdir, 'summary.json')))['generations'] == 2
  # A resume that asks for another strategy: one line, exit 2, the checkpoints untouched.
  saved = sorted(os.listdir(os.path.join(workdir, 'checkpoints')))
  other = _evolve(workdir, '--config.max_generations=3', *TINY, '--config.es.diagonal=True')
  assert other.returncode == 2, (other.stdout + other.stderr)[-3000:]
  errors = [line for line in other.stderr.splitlines() if line.startswith('error:')]
  assert len(errors) == 1 and 'made with es.diagonal=False, this config asks for True' in errors[0]
  assert sorted(os.listdir(os.path.join(workdir, 'checkpoints'))) == saved
