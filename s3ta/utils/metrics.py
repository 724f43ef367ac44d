"""Metrics of a run in its workdir (JSONL, TensorBoard, CSV) and a console progress line.

`MetricsWriter(workdir, label)` appends one JSON object per `write()` to
`<workdir>/metrics.jsonl` (shared by every writer of the run; the `label` field
tells learner, actor and evaluator lines apart), and optionally writes TensorBoard
scalars to `<workdir>/tensorboard/<label>/` and rows to `<workdir>/metrics_<label>.csv`.
On remote storage (`gs://`) the JSONL lines go into per-writer chunk objects under
`<workdir>/metrics_chunks/` instead (`read_jsonl_lines` reads both forms). TensorFlow
is imported only when TensorBoard output is on, so the pure-JAX core stays importable
without TF (import `s3ta` before TF, as everywhere).

`ProgressPrinter` prints at most one `format_progress` line every `interval_s`
seconds, with rates computed between consecutive printed lines.
"""

import atexit
import csv
import json
import logging
import math
import numbers
import sys
import time
import uuid
from typing import Any, Callable, Mapping, Optional

import numpy as np

from s3ta.utils import storage

JSONL_FILE = 'metrics.jsonl'
# On remote storage each writer adds immutable chunks here instead of appending to
# JSONL_FILE: object stores cannot append, and concurrent rewrites would lose lines.
JSONL_CHUNKS_DIR = 'metrics_chunks'
REMOTE_FLUSH_S = 60.0  # seconds between chunks of one remote writer
_RESERVED = ('time', 'label', 'step', 'frames')  # fields every JSONL record has
_LABEL_CHARS = set('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.')


def _scalar(key: str, value: Any) -> float:
  if isinstance(value, numbers.Number) and not isinstance(value, complex):
    return float(value)
  array = np.asarray(value)
  if array.shape != () or array.dtype.kind not in 'biuf':
    raise ValueError(f'Metric {key!r} must be a real scalar, got {array.dtype} of shape '
                     f'{array.shape}.')
  return float(array)


class _ChunkedJsonl:
  """A JSONL 'append' on object storage: lines are buffered and written as a new object
  `<directory>/<label>-<token>-<n>.jsonl` at most every `period_s` (and at close/exit)."""

  def __init__(self, directory: str, label: str, period_s: float = REMOTE_FLUSH_S,
               clock: Callable[[], float] = time.monotonic):
    self._directory, self._period_s, self._clock = directory, period_s, clock
    self._prefix = f'{label}-{uuid.uuid4().hex[:12]}'
    self._lines: list[str] = []
    self._count = 0
    self._last = clock()
    storage.makedirs(directory)
    atexit.register(self.close)  # the last lines of a process that exits normally

  def write(self, text: str) -> None:
    self._lines.append(text)

  def flush(self, force: bool = False) -> None:
    if not self._lines or (not force and self._clock() - self._last < self._period_s):
      return
    path = storage.join(self._directory, f'{self._prefix}-{self._count:06d}.jsonl')
    storage.write_bytes(path, ''.join(self._lines).encode('utf-8'))
    self._lines, self._count, self._last = [], self._count + 1, self._clock()

  def close(self) -> None:
    self.flush(force=True)


def read_jsonl_lines(workdir: str) -> list[bytes]:
  """The raw lines of a workdir's metrics: `metrics.jsonl` (local runs) and, on remote
  storage, every chunk of `metrics_chunks/` (chunk after chunk, each in write order)."""
  lines = []
  path = storage.join(workdir, JSONL_FILE)
  if storage.isfile(path):
    lines.extend(storage.read_bytes(path).splitlines())
  chunks = storage.join(workdir, JSONL_CHUNKS_DIR)
  if storage.isdir(chunks):
    for name in sorted(storage.listdir(chunks)):
      lines.extend(storage.read_bytes(storage.join(chunks, name)).splitlines())
  return lines


class MetricsWriter:
  """Writes scalar metrics of one process (`label`) of a run to its workdir."""

  def __init__(self, workdir: str, label: str = 'learner', *, tensorboard: bool = True,
               csv_file: bool = False, clock: Callable[[], float] = time.time):
    """Opens the outputs (created if missing, appended to if present).

    Args:
      workdir: the run's directory.
      label: which process writes (letters, digits, '_-.'), e.g. 'learner', 'actor_3'.
      tensorboard: also write TensorBoard event files (imports TensorFlow).
      csv_file: also write `metrics_<label>.csv`; its columns are fixed by the first write.
      clock: wall clock for the 'time' field.
    """
    if not label or not set(label) <= _LABEL_CHARS:
      raise ValueError(f'label must be non-empty letters, digits or "_-.", got {label!r}.')
    storage.makedirs(workdir)
    self.label = label
    self._clock = clock
    if storage.is_remote(workdir):
      if csv_file:
        raise ValueError(f'CSV metrics are written to local workdirs only, not {workdir!r}.')
      self._jsonl = _ChunkedJsonl(storage.join(workdir, JSONL_CHUNKS_DIR), label)
    else:
      self._jsonl = storage.open_file(storage.join(workdir, JSONL_FILE), 'a')
    self._csv_path = storage.join(workdir, f'metrics_{label}.csv') if csv_file else None
    self._csv_file = self._csv_writer = None
    self._csv_dropped: set[str] = set()
    self._tb = None
    if tensorboard:
      try:
        import tensorflow as tf  # pylint: disable=g-import-not-at-top
      except ImportError as e:
        raise ImportError('TensorBoard output needs TensorFlow; pass tensorboard=False '
                          'where it is not installed.') from e
      self._tf = tf
      self._tb = tf.summary.create_file_writer(storage.join(workdir, 'tensorboard', label))

  def write(self, step: int, values: Mapping[str, Any], *, frames: Optional[int] = None) -> None:
    """Records scalar `values` at `step` (the TensorBoard x-axis), with `frames` if known.

    Non-finite values are written as JSON null (strict JSON has no NaN/inf) and
    as NaN/inf to TensorBoard and CSV.
    """
    scalars = {str(k): _scalar(str(k), v) for k, v in values.items()}
    reserved = set(_RESERVED) & set(scalars)
    if reserved:
      raise ValueError(f'Metric names {sorted(reserved)} clash with the record fields {_RESERVED}; '
                       'rename them.')
    record = {'time': self._clock(), 'label': self.label, 'step': int(step)}
    if frames is not None:
      record['frames'] = int(frames)
    record.update({k: v if math.isfinite(v) else None for k, v in scalars.items()})
    self._jsonl.write(json.dumps(record) + '\n')
    self._jsonl.flush()
    if self._tb is not None:
      with self._tb.as_default():
        for key, value in scalars.items():
          self._tf.summary.scalar(key, value, step=int(step))
    if self._csv_path is not None:
      self._write_csv(dict(record, **scalars))

  def _write_csv(self, row: dict) -> None:
    if self._csv_writer is None:
      header = ''
      if storage.exists(self._csv_path):
        with storage.open_file(self._csv_path) as f:
          header = f.readline()
      exists = bool(header.strip())
      fields = next(csv.reader([header])) if exists else list(row)
      self._csv_file = storage.open_file(self._csv_path, 'a')
      self._csv_writer = csv.DictWriter(self._csv_file, fields, extrasaction='ignore')
      if not exists:
        self._csv_writer.writeheader()
    new = set(row) - set(self._csv_writer.fieldnames) - self._csv_dropped
    if new:
      logging.warning('Metrics %s are not CSV columns of %s (fixed by its first row); they '
                      'are in metrics.jsonl only.', sorted(new), self._csv_path)
      self._csv_dropped |= new
    self._csv_writer.writerow(row)
    self._csv_file.flush()

  def flush(self) -> None:
    self._jsonl.flush()
    if self._tb is not None:
      self._tb.flush()
    if self._csv_file is not None:
      self._csv_file.flush()

  def close(self) -> None:
    self.flush()
    self._jsonl.close()
    if self._tb is not None:
      self._tb.close()
      self._tb = None
    if self._csv_file is not None:
      self._csv_file.close()
      self._csv_file = self._csv_writer = None

  def __enter__(self) -> 'MetricsWriter':
    return self

  def __exit__(self, *exc) -> None:
    self.close()


def record_logger(workdir: str, label: str, step_key: str, frames_key: Optional[str] = None,
                  tensorboard: bool = False) -> Callable[[dict], None]:
  """callable(record dict) -> one flushed `MetricsWriter` line of `label` in `workdir`.

  The record's `step_key` (and `frames_key`) values become the line's step (and
  frames); non-scalar and None values are dropped, booleans become 0/1.
  """
  writer = MetricsWriter(workdir, label, tensorboard=tensorboard)

  def log(record: dict) -> None:
    values = {}
    for key, value in record.items():
      if key in _RESERVED or value is None:
        continue
      if isinstance(value, (bool, np.bool_)):
        value = int(value)
      if isinstance(value, (int, float, np.integer, np.floating)):
        values[key] = value
    step = int(record.get(step_key) or 0)
    frames = record.get(frames_key) if frames_key else None
    writer.write(step, values, frames=None if frames is None else int(frames))
    writer.flush()

  return log


def _si(value: float) -> str:
  for unit, scale in (('G', 1e9), ('M', 1e6), ('K', 1e3)):
    if abs(value) >= scale:
      return f'{value / scale:.2f}{unit}'
  return f'{value:.0f}' if float(value).is_integer() else f'{value:.1f}'


def format_progress(*, frames: int, frames_per_s: float, learner_steps: int,
                    learner_steps_per_s: float, episodes: int,
                    mean_return: Optional[float] = None, queue_fill: Optional[float] = None,
                    policy_lag: Optional[float] = None, actors: Optional[dict] = None,
                    inference: Optional[dict] = None) -> str:
  """One progress line, e.g. 'frames 1.20M (8.10K/s) | learner 1.50K steps (3.2/s) | ...'.

  Args:
    queue_fill: fraction of the replay queue in use, in [0, 1].
    policy_lag: learner steps between the parameters that acted and the current ones.
    actors: supervised actors {'alive', 'nodes', 'restarts', ...}: 'actors 3/4 alive, 2 restarts'.
    inference: {'mode', 'requests_per_call', 'retries', ...}: 'inference central 3.2 req/call'
      (or 'inference actor'); retried calls are shown when there are any.
  """
  parts = [f'frames {_si(frames)} ({_si(frames_per_s)}/s)',
           f'learner {_si(learner_steps)} steps ({learner_steps_per_s:.1f}/s)',
           f'episodes {episodes}']
  if mean_return is not None:
    parts.append(f'return {mean_return:.1f}')
  if queue_fill is not None:
    parts.append(f'queue {100 * queue_fill:.0f}%')
  if policy_lag is not None:
    parts.append(f'policy lag {policy_lag:.1f}')
  if actors is not None:
    parts.append(f'actors {actors["alive"]}/{actors["nodes"]} alive, {actors["restarts"]} '
                 f'restart{"" if actors["restarts"] == 1 else "s"}')
  if inference is not None:
    text = f'inference {inference["mode"]}'
    if inference.get('requests_per_call') is not None:
      text += f' {inference["requests_per_call"]:.1f} req/call'
    if inference.get('retries'):
      text += f', {inference["retries"]} retried (node not answering)'
    parts.append(text)
  return ' | '.join(parts)


class ProgressPrinter:
  """Prints a progress line at most every `interval_s` seconds (rates since the last line)."""

  def __init__(self, interval_s: float = 10.0, *, print_fn: Callable[[str], None] = None,
               clock: Callable[[], float] = time.monotonic):
    if interval_s < 0:
      raise ValueError(f'interval_s must be >= 0, got {interval_s}.')
    self._interval_s = interval_s
    self._print = print_fn or (lambda line: print(line, file=sys.stdout, flush=True))
    self._clock = clock
    self._last: Optional[tuple[float, int, int]] = None  # (time, frames, learner steps)

  def update(self, *, frames: int, learner_steps: int, episodes: int,
             mean_return: Optional[float] = None, queue_fill: Optional[float] = None,
             policy_lag: Optional[float] = None, actors: Optional[dict] = None,
             inference: Optional[dict] = None, force: bool = False) -> Optional[str]:
    """Prints and returns a line if `interval_s` passed since the previous one (or `force`).

    The first call only starts the clock (no rate is known yet) unless `force`.
    """
    now = self._clock()
    if self._last is None and not force:
      self._last = (now, frames, learner_steps)
      return None
    last_time, last_frames, last_steps = self._last or (now, frames, learner_steps)
    elapsed = now - last_time
    if elapsed < self._interval_s and not force:
      return None
    rate = (lambda new, old: (new - old) / elapsed) if elapsed > 0 else (lambda new, old: 0.0)
    line = format_progress(frames=frames, frames_per_s=rate(frames, last_frames),
                           learner_steps=learner_steps,
                           learner_steps_per_s=rate(learner_steps, last_steps),
                           episodes=episodes, mean_return=mean_return, queue_fill=queue_fill,
                           policy_lag=policy_lag, actors=actors, inference=inference)
    self._last = (now, frames, learner_steps)
    self._print(line)
    return line
