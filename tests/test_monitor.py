"""The launcher's run monitor: totals, steady-state rate and the final record from metrics.jsonl."""

import json
import os

import pytest

from launch import monitor as monitor_lib


def _write(path, records):
  with open(path, 'a') as f:
    for record in records:
      f.write(json.dumps(record) + '\n')


def test_monitor_reads_totals_rate_and_the_stop_reason_without_keeping_every_record(tmp_path):
  path = os.path.join(tmp_path, 'metrics.jsonl')
  _write(path, [])
  monitor = monitor_lib.RunMonitor(str(tmp_path), queue_size=10)
  # Two actors, 1 000 records each: 100 frames/s and 50 frames/s between their first and last.
  for i in range(1000):
    _write(path, [
        {'label': 'actor_0', 'time': 10.0 + i, 'frames': 100 * i, 'episodes': i,
         'window_episodes': 1, 'window_return_mean': -20.0 + i / 1000},
        {'label': 'actor_1', 'time': 10.0 + i, 'frames': 50 * i, 'episodes': i},
    ])
  _write(path, [{'label': 'learner', 'time': 1010.0, 'learner_steps': 7, 'queue_size': 5,
                 'final': True, 'stop_reason_code': 5}])
  assert monitor.poll() == 2001
  assert monitor.end_to_end_frames_per_s() == pytest.approx(150.0)
  snapshot = monitor.snapshot()
  assert snapshot['frames'] == 999 * 150 and snapshot['episodes'] == 2 * 999
  assert snapshot['queue_fill'] == pytest.approx(0.5) and snapshot['learner_steps'] == 7
  # The mean over the newest 100 one-episode windows (returns -20 + i / 1000, i = 900..999).
  assert snapshot['mean_return'] == pytest.approx(-20.0 + 949.5 / 1000)
  assert monitor.stop_reason() == 'non-finite'
  assert 'stop reason        non-finite' in monitor_lib.format_summary(monitor, 1.0, None)
  assert not hasattr(monitor, 'records')  # memory stays bounded on long runs


def test_restarted_actor_keeps_its_frames_and_supervisors_show_in_progress_and_summary(tmp_path):
  path = os.path.join(tmp_path, 'metrics.jsonl')
  _write(path, [
      {'label': 'supervisor.actor_0', 'time': 0.0, 'alive': 1, 'restarts': 0},
      {'label': 'supervisor.actor_1', 'time': 0.0, 'alive': 1, 'restarts': 0},
      {'label': 'actor_0', 'time': 1.0, 'pid': 11, 'frames': 400, 'episodes': 2},
      {'label': 'actor_0', 'time': 2.0, 'pid': 11, 'frames': 900, 'episodes': 3},
      {'label': 'supervisor.actor_0', 'time': 3.0, 'alive': 0, 'restarts': 1, 'exit_code': -9},
      {'label': 'supervisor.actor_0', 'time': 4.0, 'alive': 1, 'restarts': 1},
      {'label': 'actor_0', 'time': 5.0, 'pid': 12, 'frames': 100, 'episodes': 1},  # counts from 0
      {'label': 'supervisor.actor_1', 'time': 6.0, 'alive': 0, 'restarts': 5, 'degraded': 1},
  ])
  monitor = monitor_lib.RunMonitor(str(tmp_path), queue_size=10, from_start=True)
  monitor.poll()
  snapshot = monitor.snapshot()
  assert snapshot['frames'] == 1000 and snapshot['episodes'] == 4  # 900 + 100, 3 + 1
  assert monitor.end_to_end_frames_per_s() == pytest.approx((1000 - 400) / 4.0)
  assert monitor.progress_kwargs()['actors'] == {'alive': 1, 'nodes': 2, 'restarts': 6,
                                                  'degraded': ['actor_1']}
  summary = monitor_lib.format_summary(monitor, 1.0, None)
  assert 'worker restarts    6 (restart budget spent, left down: actor_1)' in summary
