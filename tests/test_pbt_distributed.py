"""PBT in a real local Launchpad program: an exploit makes the recipient's params equal the donor's.

The test runs this file as a script in a subprocess (Launchpad reads its logging
dir at import, and node processes unpickle the probe class by value from
`__main__`). The program is `launch.pbt.build_pbt_program` with the 'test'
variant of experiments/pbt_smoke.py, plus one probe node that:

1. waits until both members have a fitness, then feeds member 1 maximal Pong
   returns so the truncation order is known (member 0 must copy member 1);
2. right after a controller round (state file just rewritten) pauses both
   learners (`pause_training`: no more sgd steps; courier keeps serving);
3. waits for the controller's next exploit of member 0 (pbt_events.jsonl);
4. reads both learners' params and optimiser state over courier and compares
   them exactly (they cannot drift: both are paused), and the recipient's
   hyperparameters with the event's new values; writes probe_result.json and
   stops the program. If the round after a pause brings no exploit (member not
   ready yet), it resumes, waits and tries again.
"""

import json
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT = 'probe_result.json'


class ExploitProbe:
  """Probe node: see the module docstring."""

  def __init__(self, learners, workdir: str, timeout_s: float, window: int, poll_interval_s: float):
    self._learners = list(learners)
    self._workdir = workdir
    self._timeout_s = timeout_s
    self._window = window
    self._poll_s = poll_interval_s

  def _events(self, member: int, kind: str = 'exploit') -> list:
    from s3ta.pbt import storage  # pylint: disable=g-import-not-at-top
    return [e for e in storage.read_jsonl(os.path.join(self._workdir, storage.EVENTS_FILE))
            if kind in (None, e['event']) and e['member'] == member]

  def _check(self, stop, deadline) -> dict:
    import jax  # pylint: disable=g-import-not-at-top
    import numpy as np  # pylint: disable=g-import-not-at-top
    from s3ta.pbt import storage  # pylint: disable=g-import-not-at-top
    state_path = os.path.join(self._workdir, storage.STATE_FILE)
    while time.time() < deadline and not stop.is_set():  # 1. both members have a fitness
      try:
        if all(l.get_fitness()['fitness'] is not None for l in self._learners):
          break
      except Exception:  # pylint: disable=broad-except  (learners still starting)
        pass
      time.sleep(1.0)
    attempts = 0
    while time.time() < deadline and not stop.is_set():
      attempts += 1
      self._learners[1].report_episodes('Pong', [21.0] * self._window)
      self._learners[1].report_episodes('Breakout', [500.0] * self._window)
      # 2. pause right after a controller round, well before the next one.
      while time.time() < deadline and not stop.is_set():
        age = time.time() - os.path.getmtime(state_path)
        if 0.3 <= age <= self._poll_s - 1.5:
          break
        time.sleep(0.1)
      before = len(self._events(0))
      counts = [l.pause_training() for l in self._learners]
      wait_until = time.time() + 2 * self._poll_s + 5
      while time.time() < min(wait_until, deadline) and len(self._events(0)) == before:
        time.sleep(0.2)
      events = self._events(0)
      if len(events) > before:
        time.sleep(0.5)  # the controller writes the event after set_state returned
        event = events[-1]
        recipient, donor = self._learners[0].get_state(), self._learners[1].get_state()
        # Weights and optimizer moments are the donor's; the injected hyperparameters inside the
        # optimizer state are the recipient's own (checked below), so they are left out here.
        moments = lambda s: (s['params'], s['opt_state'].count, s['opt_state'].inner_state)
        leaves_r = jax.tree_util.tree_leaves(moments(recipient))
        leaves_d = jax.tree_util.tree_leaves(moments(donor))
        equal = len(leaves_r) == len(leaves_d) and all(
            np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(leaves_r, leaves_d))
        hyperparams = self._learners[0].get_hyperparams()
        # The round's last event of member 0 (an explore may follow the exploit) holds its values.
        final = [e for e in self._events(0, None) if e['time'] == event['time']][-1]['new_hyperparams']
        hp_equal = all(abs(hyperparams[k] - v) <= 1e-6 * abs(v) for k, v in final.items())
        after = [l.get_fitness()['learner_steps'] for l in self._learners]
        return {'ok': bool(equal and hp_equal), 'params_equal': bool(equal), 'hyperparams_equal': hp_equal,
                'event': event, 'final_hyperparams': final, 'attempts': attempts, 'num_leaves': len(leaves_r),
                'steps_at_pause': [c['learner_steps'] for c in counts], 'steps_at_check': after,
                'recipient_hyperparams': hyperparams}
      for l in self._learners:
        l.resume_training()
      time.sleep(1.0)
    return {'ok': False, 'error': 'no exploit of member 0 before the deadline', 'attempts': attempts}

  def run(self) -> None:
    import launchpad as lp  # pylint: disable=g-import-not-at-top
    stop = lp.stop_event()
    try:
      result = self._check(stop, time.time() + self._timeout_s)
    except Exception as e:  # pylint: disable=broad-except
      result = {'ok': False, 'error': repr(e)}
    with open(os.path.join(self._workdir, RESULT), 'w') as f:
      json.dump(result, f, indent=1, default=str)
    print(f'[probe] {result}', flush=True)
    lp.stop()


def run_program(workdir: str) -> None:
  """Builds the PBT program + probe and runs it to the end (script entry point)."""
  os.environ['LAUNCHPAD_LOGGING_DIR'] = os.path.join(workdir, 'logs')
  import tempfile  # pylint: disable=g-import-not-at-top
  os.makedirs(os.path.join(workdir, 'tmp'), exist_ok=True)
  tempfile.tempdir = os.path.join(workdir, 'tmp')
  sys.path.insert(0, ROOT)
  import s3ta  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  import launchpad as lp  # pylint: disable=g-import-not-at-top
  from launch import pbt  # pylint: disable=g-import-not-at-top
  from launchpad.nodes.python.local_multi_processing import PythonProcess  # pylint: disable=g-import-not-at-top
  from experiments import pbt_smoke  # pylint: disable=g-import-not-at-top
  config = pbt_smoke.get_config('test')
  program, learners = pbt.build_pbt_program(config, workdir)
  with program.group('probe'):
    program.add_node(lp.PyClassNode(ExploitProbe, learners, workdir, 150.0, config.fitness_window,
                                    config.pbt.poll_interval_s))
  resources = pbt.local_resources(config)
  resources['probe'] = PythonProcess(env={'JAX_PLATFORMS': 'cpu', 'TF_CPP_MIN_LOG_LEVEL': '2'})
  manager = lp.launch(program, launch_type='local_mp', terminal='output_to_files', local_resources=resources)
  manager.wait()


@pytest.mark.distributed
def test_exploit_copies_params_into_recipient_learner(tmp_path):
  start = time.time()
  proc = subprocess.run([sys.executable, os.path.abspath(__file__), str(tmp_path)], cwd=ROOT,
                        capture_output=True, text=True, timeout=400)
  elapsed = time.time() - start
  result_path = tmp_path / RESULT
  logs = ''
  probe_log = tmp_path / 'logs' / 'probe' / '0'
  if probe_log.exists():
    logs = probe_log.read_text()[-3000:]
  assert result_path.exists(), f'no probe result; rc={proc.returncode}\n{proc.stderr[-3000:]}\n{logs}'
  result = json.loads(result_path.read_text())
  assert result['ok'], result
  assert result['params_equal'] and result['hyperparams_equal']
  assert result['event']['donor'] == 1 and result['event']['member'] == 0
  assert result['steps_at_check'] == result['steps_at_pause']  # nothing trained in between
  # The controller's own record agrees: member 0's weights descend from member 1.
  state = json.loads((tmp_path / 'pbt_state.json').read_text())
  assert state['counters']['exploits'] >= 1
  assert any(e['event'] == 'exploit' and e['donor'] == 1 for e in state['members'][0]['lineage'])
  # Every member's actors ran as supervised workers: the worker the supervisor started acted.
  for m in (0, 1):
    with open(tmp_path / f'member_{m}' / 'metrics.jsonl') as f:
      records = [json.loads(line) for line in f if line.strip()]
    started = {r['label'][len('supervisor.'):]: r['worker_pid'] for r in records
               if r['label'].startswith('supervisor.actor_') and r.get('alive')}
    acted = {r['label']: r['pid'] for r in records if r['label'].startswith('actor_')}
    assert started and started == acted, (started, acted)
  print(f'distributed PBT exploit test: {elapsed:.0f} s, {result["attempts"]} attempt(s)')


if __name__ == '__main__':
  run_program(os.path.abspath(sys.argv[1]))
