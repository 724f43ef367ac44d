"""Metrics writer outputs (JSONL, TensorBoard events, CSV) and the progress line."""

import csv
import glob
import json
import math
import os

import numpy as np
import pytest

from s3ta.utils import metrics


def test_jsonl_tensorboard_and_csv(tmp_path):
  times = iter([100.0, 101.5, 103.0])
  with metrics.MetricsWriter(str(tmp_path), 'learner', csv_file=True,
                             clock=lambda: next(times)) as writer:
    writer.write(1, {'loss': np.float32(0.5), 'grad_norm': 2}, frames=3200)
    writer.write(2, {'loss': float('nan'), 'grad_norm': np.array(3.0)}, frames=6400)
    writer.write(3, {'loss': 0.25, 'grad_norm': 1.0, 'new_metric': 7})
  with metrics.MetricsWriter(str(tmp_path), 'evaluator', tensorboard=False) as writer:
    writer.write(2, {'episode_return': -21})

  with open(tmp_path / 'metrics.jsonl') as f:
    lines = [json.loads(line) for line in f]
  assert lines[0] == {'time': 100.0, 'label': 'learner', 'step': 1, 'frames': 3200, 'loss': 0.5,
                      'grad_norm': 2.0}
  assert lines[1]['loss'] is None and lines[1]['grad_norm'] == 3.0  # NaN -> null (strict JSON)
  assert 'frames' not in lines[2] and lines[2]['new_metric'] == 7.0
  assert lines[3]['label'] == 'evaluator' and lines[3]['episode_return'] == -21.0

  events = glob.glob(str(tmp_path / 'tensorboard' / 'learner' / 'events.out.tfevents.*'))
  assert len(events) == 1 and os.path.getsize(events[0]) > 0
  assert not os.path.exists(tmp_path / 'tensorboard' / 'evaluator')
  import tensorflow as tf  # read the events back: every scalar at its step
  seen = {}
  for event in tf.compat.v1.train.summary_iterator(events[0]):
    for value in event.summary.value:
      seen[(value.tag, event.step)] = float(tf.make_ndarray(value.tensor))
  assert seen[('loss', 1)] == 0.5 and math.isnan(seen[('loss', 2)]) and seen[('new_metric', 3)] == 7

  with open(tmp_path / 'metrics_learner.csv', newline='') as f:
    rows = list(csv.DictReader(f))
  assert list(rows[0]) == ['time', 'label', 'step', 'frames', 'loss', 'grad_norm']
  assert [r['loss'] for r in rows] == ['0.5', 'nan', '0.25'] and rows[2]['frames'] == ''


def test_writer_validation(tmp_path):
  with pytest.raises(ValueError, match='label'):
    metrics.MetricsWriter(str(tmp_path), 'bad/label', tensorboard=False)
  with metrics.MetricsWriter(str(tmp_path), tensorboard=False) as writer:
    with pytest.raises(ValueError, match=r"Metric 'q' must be a real scalar, got float64 of shape \(2,\)"):
      writer.write(0, {'q': np.zeros(2)})
    with pytest.raises(ValueError, match=r"Metric names \['step'\] clash with the record fields"):
      writer.write(0, {'step': 1})


def test_format_progress():
  line = metrics.format_progress(frames=1_234_567, frames_per_s=8123.4, learner_steps=1500,
                                 learner_steps_per_s=3.25, episodes=42, mean_return=-20.25,
                                 queue_fill=0.75, policy_lag=2.5)
  assert line == ('frames 1.23M (8.12K/s) | learner 1.50K steps (3.2/s) | episodes 42 | '
                  'return -20.2 | queue 75% | policy lag 2.5')
  assert metrics.format_progress(frames=0, frames_per_s=0.0, learner_steps=0,
                                 learner_steps_per_s=0.0, episodes=0) == (
                                     'frames 0 (0/s) | learner 0 steps (0.0/s) | episodes 0')
  assert metrics.format_progress(
      frames=0, frames_per_s=0.0, learner_steps=0, learner_steps_per_s=0.0, episodes=0,
      actors={'alive': 3, 'nodes': 4, 'restarts': 2}).endswith('| actors 3/4 alive, 2 restarts')
  zeros = dict(frames=0, frames_per_s=0.0, learner_steps=0, learner_steps_per_s=0.0, episodes=0)
  assert metrics.format_progress(**zeros, inference={'mode': 'actor'}).endswith(
      '| inference actor')
  assert metrics.format_progress(**zeros, inference={
      'mode': 'central', 'requests_per_call': 3.25, 'retries': 2}).endswith(
          '| inference central 3.2 req/call, 2 retried (node not answering)')


def test_progress_printer_rate_limits_and_computes_rates():
  now, printed = [0.0], []
  printer = metrics.ProgressPrinter(10.0, print_fn=printed.append, clock=lambda: now[0])
  assert printer.update(frames=0, learner_steps=0, episodes=0) is None  # starts the clock
  now[0] = 5.0
  assert printer.update(frames=500, learner_steps=5, episodes=1) is None  # too early
  now[0] = 10.0
  line = printer.update(frames=20_000, learner_steps=40, episodes=3, mean_return=1.0)
  assert line.startswith('frames 20.00K (2.00K/s) | learner 40 steps (4.0/s) | episodes 3')
  now[0] = 30.0
  line = printer.update(frames=60_000, learner_steps=60, episodes=5)
  assert 'frames 60.00K (2.00K/s)' in line and '(1.0/s)' in line
  assert printed == [printed[0], line] and len(printed) == 2
  assert printer.update(frames=60_000, learner_steps=60, episodes=5, force=True) is not None
