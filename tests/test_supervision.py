"""The actor/evaluator supervisor with real child processes: restarts, backoff, budget, stop."""

import json
import os
import signal
import sys
import threading
import time

import cloudpickle
import pytest

from launch import supervision

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the child cannot import this file


class _Worker:
  """Appends 'start <attempt> <pid>' to `log`; crashes (exit 3) while attempt < crashes."""

  def __init__(self, log: str, crashes: int, stop_event, attempt: int):
    self.log, self.crashes, self.stop, self.attempt = log, crashes, stop_event, attempt

  def run(self):
    with open(self.log, 'a') as f:
      f.write(f'start {self.attempt} {os.getpid()}\n')
    if self.attempt < self.crashes:
      os._exit(3)
    while not self.stop.wait(0.05):
      pass
    with open(self.log, 'a') as f:
      f.write(f'stopped {self.attempt}\n')


def _make_worker(log, crashes, *, stop_event, attempt):
  return _Worker(log, crashes, stop_event, attempt)


def _lines(path):
  return open(path).read().split('\n')[:-1] if os.path.exists(path) else []


def _wait_for(predicate, timeout=60.0):
  deadline = time.time() + timeout
  while time.time() < deadline:
    if predicate():
      return
    time.sleep(0.05)
  pytest.fail('timed out')


def _start(tmp_path, crashes, max_restarts, backoff_s=0.01):
  log = str(tmp_path / 'worker.log')
  records = []
  stop = threading.Event()
  supervisor = supervision.Supervisor(
      'actor_0', lambda **kw: _make_worker(log, crashes, **kw), max_restarts=max_restarts,
      backoff_s=backoff_s, grace_s=10.0, stop_event=stop, logger=records.append)
  thread = threading.Thread(target=supervisor.run)
  thread.start()
  return log, records, stop, thread, supervisor


def test_restart_delay_doubles_up_to_the_cap():
  assert [supervision.restart_delay(n, 1.5, 10.0) for n in (1, 2, 3, 4, 5)] == [
      1.5, 3.0, 6.0, 10.0, 10.0]


def test_describe_exit_names_the_signal():
  assert supervision.describe_exit(-signal.SIGKILL) == 'killed by SIGKILL'
  assert supervision.describe_exit(3) == 'exit status 3'


def test_crashed_workers_are_restarted_with_new_attempts_and_stopped_cleanly(tmp_path):
  log, records, stop, thread, supervisor = _start(tmp_path, crashes=2, max_restarts=5)
  try:
    _wait_for(lambda: any(line.startswith('start 2 ') for line in _lines(log)))
    time.sleep(0.5)  # attempt 2 is running (it does not crash)
    assert supervisor.restarts == 2 and thread.is_alive()
  finally:
    stop.set()
    thread.join(30)
  assert not thread.is_alive()
  starts = [line.split() for line in _lines(log) if line.startswith('start')]
  assert [int(s[1]) for s in starts] == [0, 1, 2]
  assert len({s[2] for s in starts}) == 3  # three processes
  assert _lines(log)[-1] == 'stopped 2'  # SIGTERM reached the last one's stop event
  assert [r['exit_code'] for r in records if 'exit_code' in r] == [3, 3, 0]
  assert records[-1]['alive'] == 0 and records[-1]['restarts'] == 2
  assert json.dumps(records)  # plain values only (they become metrics records)


def test_sigkilled_worker_is_restarted(tmp_path):
  log, records, stop, thread, supervisor = _start(tmp_path, crashes=0, max_restarts=1)
  try:
    _wait_for(lambda: _lines(log))
    os.kill(int(_lines(log)[0].split()[2]), signal.SIGKILL)
    _wait_for(lambda: any(line.startswith('start 1 ') for line in _lines(log)))
    assert supervisor.restarts == 1
  finally:
    stop.set()
    thread.join(30)
  assert -signal.SIGKILL in [r.get('exit_code') for r in records]


def test_spent_budget_leaves_the_node_down_until_the_program_stops(tmp_path, capsys):
  log, records, stop, thread, supervisor = _start(tmp_path, crashes=100, max_restarts=2)
  try:
    _wait_for(lambda: any(r.get('degraded') for r in records))
    time.sleep(0.3)
    assert thread.is_alive()  # the node does not end the program
    assert len([line for line in _lines(log) if line.startswith('start')]) == 3
    assert supervisor.restarts == 2
  finally:
    stop.set()
    thread.join(30)
  assert not thread.is_alive()
  assert 'restart budget (2) spent' in capsys.readouterr().out


def test_bad_budget_is_refused():
  with pytest.raises(ValueError, match='max_restarts must be >= 0, got -1'):
    supervision.Supervisor('actor_0', lambda **kw: None, max_restarts=-1, backoff_s=1.0)
