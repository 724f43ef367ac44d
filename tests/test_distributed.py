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

from launch import isolation

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
  """Kills the launcher `pid` and every process under it, and reaps the launcher (a failed
  test must not leave a zombie child that the next test's orphan check would count)."""
  try:
    parent = psutil.Process(pid)
  except psutil.NoSuchProcess:
    return
  for p in parent.children(recursive=True) + [parent]:
    try:
      p.kill()
    except psutil.NoSuchProcess:
      pass
  try:
    parent.wait(timeout=30)
  except (psutil.NoSuchProcess, psutil.TimeoutExpired, ChildProcessError):
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


def _wait_for_record(workdir, process, label, skip=0, timeout=180):
  """The first metrics record of node `label` after its first `skip` ones, once written."""
  deadline = time.time() + timeout
  while time.time() < deadline:
    if process.poll() is not None:
      pytest.fail(f'the launcher exited early: {process.stdout.read()[-3000:]}')
    if (workdir / 'metrics.jsonl').exists():
      rows = [r for r in _records(workdir) if r['label'] == label][skip:]
      if rows:
        return rows[0]
    time.sleep(1)
  pytest.fail(f'{label} never reported')


def _wait_for_learner_record(workdir, process, skip=0, timeout=180):
  return _wait_for_record(workdir, process, 'learner', skip, timeout)


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


# The killed-actor run's length: the restarted worker (imports, compile: 10-15 s) must act before
# the learner, fed by actor_1 alone, reaches it. At 200 steps it sometimes did not (2 of 3 fresh
# suites on 2026-11-25 ended with the new worker's start-up record only).
STEPS = 600


def test_actors_feed_learner_survive_a_killed_actor_resume_and_ctrl_c(tmp_path):
  """A run to STEPS learner steps in which actor_0's worker is SIGKILLed: it is restarted,
  acts on newer parameters, and the run ends normally (exit 0); then resume and Ctrl-C."""
  workdir = tmp_path / 'run'
  process = _launch(workdir, f'--config.max_learner_steps={STEPS}', '--config.max_seconds=600')
  try:
    killed_at = _wait_for_learner_record(workdir, process)
    _wait_for_record(workdir, process, 'actor_0')  # under load it may report after the learner
    killed = [r for r in _records(workdir) if r['label'] == 'actor_0'][-1]
    os.kill(int(killed['pid']), signal.SIGKILL)
    output, _ = process.communicate(timeout=300)
  finally:
    _kill_tree(process.pid)
  assert process.returncode == 0, output[-4000:]
  assert 'Run summary' in output and 'stop reason        max_learner_steps' in output, output[-3000:]
  assert 'worker restarts    1\n' in output and 'actors 2/2 alive, 1 restart' in output, output[-3000:]
  _assert_no_orphans(workdir)

  records = _records(workdir)
  learner = [r for r in records if r['label'] == 'learner']
  actors = {r['label'] for r in records if r['label'].startswith('actor_')}
  assert actors == {'actor_0', 'actor_1'}
  final = [r for r in learner if r.get('final')]
  assert len(final) == 1 and final[0]['learner_steps'] == STEPS > killed_at['learner_steps']
  assert final[0]['items_consumed'] == STEPS * 4
  for label in actors:  # each actor produced data and received newer parameters (a record's
    rows = [r for r in records if r['label'] == label]  # counts are its own process's)
    assert max(r['frames'] for r in rows) > 0 and max(r['unrolls'] for r in rows) > 0
    assert max(r['param_version'] for r in rows) > 0
  supervisor = [r for r in records if r['label'] == 'supervisor.actor_0']
  assert [r['exit_code'] for r in supervisor if 'exit_code' in r][0] == -signal.SIGKILL
  assert max(r['restarts'] for r in supervisor) == 1
  restarted = [r for r in records if r['label'] == 'actor_0' and r['pid'] != killed['pid']]
  assert restarted and restarted[-1]['frames'] > 0  # the new worker acted ...
  assert max(r['param_version'] for r in restarted) > killed_at['learner_steps']  # ... on new params
  assert any(r.get('policy_lag') is not None for r in learner)
  checkpoints = sorted(os.listdir(workdir / 'checkpoints'))
  assert f'ckpt_{STEPS}' in checkpoints
  assert (workdir / 'logs' / 'learner' / '0').exists()  # node logs go into the workdir

  # Resume, then Ctrl-C: the counters continue from the checkpoint (> 60), and SIGINT to
  # the launcher stops every node (the learner saving first) within seconds.
  before = len(learner)
  process = _launch(workdir, '--config.max_learner_steps=100000', '--config.max_seconds=600')
  try:
    resumed = _wait_for_learner_record(workdir, process, skip=before)
    assert resumed['learner_steps'] > STEPS and resumed['learner_frames'] > STEPS * 4 * 10 * 4
    start = time.time()
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=40)
    assert time.time() - start < 20, output[-3000:]
    assert process.returncode == 130, output[-3000:]
    _assert_no_orphans(workdir)
  finally:
    _kill_tree(process.pid)
  learner = [r for r in _records(workdir) if r['label'] == 'learner'][before:]
  final = [r for r in learner if r.get('final')]
  assert len(final) == 1 and final[0]['learner_steps'] >= resumed['learner_steps']
  steps = int(final[0]['learner_steps'])
  assert f'ckpt_{steps}' in os.listdir(workdir / 'checkpoints')
  with open(workdir / 'checkpoints' / f'ckpt_{steps}' / 'metadata.json') as f:
    counters = json.load(f)['counters']
  assert counters['learner_steps'] == steps and counters['learner_frames'] == steps * 4 * 10 * 4


def test_crashed_learner_ends_every_process(tmp_path):
  """A killed learner stops the whole program within seconds; the launcher exits 1.

  The run uses central inference colocated in the learner process, so the actors act
  through the learner node until it dies (one launch for both checks)."""
  workdir = tmp_path / 'crashed'
  process = _launch(workdir, '--config.max_learner_steps=100000', '--config.max_seconds=600',
                    '--config.inference.mode=central', '--config.inference.colocated=True')
  try:
    learner_pid = int(_wait_for_learner_record(workdir, process)['pid'])
    deadline = time.time() + 120  # the actors' steps come from the learner's own process
    while time.time() < deadline and not any(
        r['label'] == 'inference_0' and r['pid'] == learner_pid and r['requests'] > 0 and
        r['param_version'] > 0 for r in _records(workdir)):
      time.sleep(1)
    served = [r for r in _records(workdir) if r['label'] == 'inference_0' and r['requests'] > 0]
    assert served and served[-1]['pid'] == learner_pid and served[-1]['param_version'] > 0
    start = time.time()
    os.kill(learner_pid, signal.SIGKILL)
    output, _ = process.communicate(timeout=40)
    assert time.time() - start < 25, output[-3000:]
    assert process.returncode == 1, output[-3000:]
    assert 'a node failed' in output
    _assert_no_orphans(workdir)
  finally:
    _kill_tree(process.pid)


def _is_loopback(hex_address: str) -> bool:
  """A /proc/net/tcp{,6} local address (hex, 32-bit words in host order) is 127.x or ::1."""
  raw = bytes.fromhex(hex_address)
  words = b''.join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))  # -> network order
  if len(words) == 4:
    return words[0] == 127
  return words == bytes(15) + b'\x01' or (words[:12] == bytes(10) + b'\xff\xff'
                                          and words[12] == 127)


def _listeners(pid: int) -> list:
  """(interfaces of the process's network namespace, local address) of its listening sockets."""
  found = []
  ifaces = isolation.interfaces(str(pid))
  for table in ('tcp', 'tcp6'):
    with open(f'/proc/{pid}/net/{table}') as f:
      for line in f.readlines()[1:]:
        fields = line.split()
        if fields[3] == '0A':  # TCP_LISTEN
          found.append((ifaces, fields[1].split(':')[0]))
  return found


def test_sigterm_to_the_launcher_saves_a_final_checkpoint_and_exits_143(tmp_path):
  """Also the central-inference run: actors act through an inference node (one launch for both)."""
  workdir = tmp_path / 'terminated'
  process = _launch(workdir, '--config.max_learner_steps=100000', '--config.max_seconds=600',
                    '--config.checkpoint_minutes=60',  # no periodic checkpoint after the first
                    '--config.inference.mode=central')
  try:
    record = _wait_for_learner_record(workdir, process)
    # Every server of the run (Reverb, courier) is reachable from this machine's loopback
    # only: it listens on a loopback address, or in a namespace whose only interface is lo.
    listeners = [(p.pid, *found) for p in _run_processes(workdir) for found in _listeners(p.pid)]
    assert len(listeners) >= 3, listeners  # Reverb, the learner's and the inference node's courier
    exposed = [x for x in listeners if x[1] != ['lo'] and not _is_loopback(x[2])]
    assert not exposed, exposed
    # Central inference: wait (bounded) until the node and an actor report updated parameters.
    deadline = time.time() + 120
    while time.time() < deadline and not all(
        any(r['label'].startswith(prefix) and r.get('param_version', 0) > 0
            for r in _records(workdir)) for prefix in ('inference_0', 'actor_')):
      time.sleep(1)
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 143, output[-3000:]
    assert 'Run summary' in output and 'stop reason        stop requested' in output, output[-3000:]
    _assert_no_orphans(workdir)
  finally:
    _kill_tree(process.pid)
  records = _records(workdir)
  final = [r for r in records if r['label'] == 'learner' and r.get('final')]
  steps = int(final[0]['learner_steps'])
  assert steps >= record['learner_steps'] > 0
  assert f'ckpt_{steps}' in os.listdir(workdir / 'checkpoints')  # written at the stop
  # Central inference served both actors' steps, with parameters the learner had updated.
  assert 'inference central on 1 node(s)' in output
  assert 'inference          central, 1 node(s)' in output
  inference = [r for r in records if r['label'] == 'inference_0']
  actors = [r for r in records if r['label'].startswith('actor_')]
  assert {r['label'] for r in actors} == {'actor_0', 'actor_1'}
  # One request per actor batch step (4 envs): every step an actor recorded was served there.
  acted = sum(max(int(r['env_steps']) for r in actors if r['label'] == label) // 4
              for label in ('actor_0', 'actor_1'))
  assert int(inference[-1]['requests']) >= acted > 0
  assert all(r['requests_per_call'] >= 1 for r in inference if r['calls_per_s'] > 0)
  assert max(r['param_version'] for r in inference) > 0
  assert max(r['param_version'] for r in actors) > 0
