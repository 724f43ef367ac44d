"""Real Launchpad local_mp runs of the tiny smoke config: Reverb + learner + 2 EnvPool actors.

Each test launches `python -m launch.train` as a user would and checks what the run
leaves behind: metrics records of every node, checkpoints, counters, exit status,
and that no process of the run outlives it.
"""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.distributed


def _launch(workdir, *overrides):
  env = dict(os.environ, JAX_PLATFORMS='cpu')
  return subprocess.Popen(
      [sys.executable, '-m', 'launch.train', '--config=experiments/smoke.py:test',
       f'--workdir={workdir}', '--progress_period_s=5', *overrides],
      cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _run(workdir, *overrides, timeout=300):
  process = _launch(workdir, *overrides)
  try:
    output, _ = process.communicate(timeout=timeout)
  except subprocess.TimeoutExpired:
    _kill_tree(process.pid)
    raise
  return process.returncode, output


def _kill_tree(pid):
  try:
    parent = psutil.Process(pid)
  except psutil.NoSuchProcess:
    return
  for p in parent.children(recursive=True) + [parent]:
    try:
      p.kill()
    except psutil.NoSuchProcess:
      pass


def _run_processes(workdir):
  """Live processes of the run: every node's command line names a file in the workdir."""
  found = []
  for p in psutil.process_iter(['pid', 'cmdline', 'status']):
    try:
      if p.info['status'] != psutil.STATUS_ZOMBIE and any(
          str(workdir) in arg for arg in (p.info['cmdline'] or [])):
        found.append(p)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
      pass
  return found


def _records(workdir):
  with open(os.path.join(workdir, 'metrics.jsonl')) as f:
    return [json.loads(line) for line in f if line.strip()]


def _assert_no_orphans(workdir):
  deadline = time.time() + 5
  while _run_processes(workdir) and time.time() < deadline:
    time.sleep(0.2)
  leftovers = _run_processes(workdir)
  assert not leftovers, [p.info['cmdline'] for p in leftovers]
  assert not psutil.Process().children(recursive=True)


def test_actors_feed_learner_params_reach_actors_and_resume(tmp_path):
  workdir = tmp_path / 'run'
  code, output = _run(workdir)
  assert code == 0, output[-4000:]
  assert 'Run summary' in output and 'stop reason        max_learner_steps' in output, output[-3000:]
  _assert_no_orphans(workdir)

  records = _records(workdir)
  learner = [r for r in records if r['label'] == 'learner']
  actors = {r['label'] for r in records if r['label'].startswith('actor_')}
  assert actors == {'actor_0', 'actor_1'}
  final = [r for r in learner if r.get('final')]
  assert len(final) == 1 and final[0]['learner_steps'] == 60
  assert final[0]['items_consumed'] == 60 * 4
  for label in actors:  # each actor produced data and received newer parameters
    rows = [r for r in records if r['label'] == label]
    assert rows[-1]['frames'] > 0 and rows[-1]['unrolls'] > 0
    assert max(r['param_version'] for r in rows) > 0
  assert any(r.get('policy_lag') is not None for r in learner)
  checkpoints = sorted(os.listdir(workdir / 'checkpoints'))
  assert 'ckpt_60' in checkpoints
  assert (workdir / 'logs' / 'learner' / '0').exists()  # node logs go into the workdir

  # Resume: the counters continue from the checkpoint (60 -> 90 learner steps).
  code, output = _run(workdir, '--config.max_learner_steps=90')
  assert code == 0, output[-4000:]
  _assert_no_orphans(workdir)
  learner = [r for r in _records(workdir) if r['label'] == 'learner'][len(learner):]
  assert learner and min(r['learner_steps'] for r in learner) > 60
  final = [r for r in learner if r.get('final')]
  assert len(final) == 1 and final[0]['learner_steps'] == 90
  assert final[0]['learner_frames'] == 90 * 4 * 10 * 4
  assert 'ckpt_90' in os.listdir(workdir / 'checkpoints')
  with open(workdir / 'checkpoints' / 'ckpt_90' / 'metadata.json') as f:
    assert json.load(f)['counters']['learner_steps'] == 90


def test_ctrl_c_and_crashed_learner_end_every_process(tmp_path):
  # Ctrl-C: SIGINT to the launcher once training runs; everything ends within ~15 s.
  workdir = tmp_path / 'interrupted'
  process = _launch(workdir, '--config.max_learner_steps=100000', '--config.max_seconds=600')
  try:
    deadline = time.time() + 180
    while time.time() < deadline:
      path = workdir / 'metrics.jsonl'
      if path.exists() and any(r['label'] == 'learner' for r in _records(workdir)):
        break
      time.sleep(1)
    else:
      pytest.fail('the learner never reported')
    start = time.time()
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=40)
    assert time.time() - start < 20, output[-3000:]
    assert process.returncode == 130, output[-3000:]
    _assert_no_orphans(workdir)
    final = [r for r in _records(workdir) if r['label'] == 'learner' and r.get('final')]
    assert final, 'the learner saves and reports when stopped'
  finally:
    _kill_tree(process.pid)

  # A crashed learner (killed) stops the whole program; the launcher exits non-zero.
  workdir = tmp_path / 'crashed'
  process = _launch(workdir, '--config.max_learner_steps=100000', '--config.max_seconds=600')
  try:
    deadline = time.time() + 180
    learner_pid = None
    while time.time() < deadline and learner_pid is None:
      if (workdir / 'metrics.jsonl').exists():
        pids = [r['pid'] for r in _records(workdir) if r['label'] == 'learner']
        learner_pid = int(pids[0]) if pids else None
      time.sleep(1)
    assert learner_pid, 'learner process not found'
    start = time.time()
    os.kill(learner_pid, signal.SIGKILL)
    output, _ = process.communicate(timeout=40)
    assert time.time() - start < 25, output[-3000:]
    assert process.returncode == 1, output[-3000:]
    _assert_no_orphans(workdir)
  finally:
    _kill_tree(process.pid)
