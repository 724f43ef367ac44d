"""A run's learner diagnostics per span of frames: what moved when the return rose or fell.

Usage: python -m s3ta.analysis.learner_stats WORKDIR [--bin_frames=500000]
         [--metrics=entropy,grad_norm,grad_norm:max,...] [--csv=PATH]

Cuts the run into bins of `--bin_frames` learner frames. Each row has the smoothed training
return at the bin's last actor window (as `s3ta.analysis.curves` plots it: the mean of the last
100 episodes), the evaluation returns whose parameters fall in the bin, and one column per
metric: the mean (`name` or `name:mean`) or maximum (`name:max`) of the learner's
`train/<name>` over its records in the bin (`name` without `train/` for counters such as
`policy_lag`). Prints the table; `--csv` also writes it. Bad arguments: one `error:` line, exit 2.
"""

import csv
import math
import os
import sys
from typing import Optional, Sequence

import numpy as np

from s3ta.analysis import curves

DEFAULT_METRICS = ('entropy', 'grad_norm', 'grad_norm:max', 'pg_loss', 'baseline_loss',
                   'mean_value', 'value_offset', 'learning_rate')
AGGREGATES = {'mean': np.mean, 'max': np.max}


def _metric_key(record: dict, name: str) -> Optional[str]:
  """The record's key for metric `name`: `train/<name>` if present, else `name`."""
  for key in (f'train/{name}', name):
    if curves.finite_number(record.get(key)) is not None:
      return key
  return None


def parse_metrics(text: str) -> list:
  """[(name, aggregate)] from 'entropy,grad_norm:max'; CurvesError naming a bad entry."""
  specs = []
  for entry in text.split(','):
    name, _, aggregate = entry.strip().partition(':')
    aggregate = aggregate or 'mean'
    if not name or aggregate not in AGGREGATES:
      raise curves.CurvesError(f'--metrics entry {entry!r} is not NAME or NAME:AGG with AGG in '
                               f'{sorted(AGGREGATES)} (e.g. entropy,grad_norm:max).')
    specs.append((name, aggregate))
  return specs


def table(workdir: str, bin_frames: float, metrics: Sequence[tuple],
          smooth_episodes: int = 100) -> tuple:
  """(header, rows) of the run in `workdir`; rows hold floats (NaN: nothing in the bin)
  except the evaluation column, a list of returns."""
  records, track = curves.load_run_records(workdir)
  train = curves.training_curve(records, track, smooth_episodes)
  evals = curves.evaluation_curve(records, track)
  learner = [r for r in records if r.get('label') == 'learner'
             and curves.finite_number(r.get('learner_frames')) is not None]
  keys = [[_metric_key(r, name) for name, _ in metrics] for r in learner]  # per record, per metric
  missing = [name for i, (name, _) in enumerate(metrics) if not any(k[i] for k in keys)]
  if missing:
    known = sorted({k[len('train/'):] for r in learner for k in r if k.startswith('train/')})
    raise curves.CurvesError(f'metric(s) {missing} are not in the learner records of {workdir!r}; '
                             f'available: {known}.')
  learner_bins = (np.array([r['learner_frames'] for r in learner], float) // bin_frames).astype(int)
  train_bins = (train.frames // bin_frames).astype(int)
  header = ['frames_from', 'train_return', 'evaluations'] + [
      name if agg == 'mean' else f'{name}:{agg}' for name, agg in metrics]
  values = [[[] for _ in metrics] for _ in range(int(learner_bins.max()) + 1)]
  for record, b, record_keys in zip(learner, learner_bins, keys):
    for i, key in enumerate(record_keys):
      if key:
        values[b][i].append(record[key])
  rows = []
  for b, per_metric in enumerate(values):
    inside = np.flatnonzero(train_bins == b)
    row = [b * bin_frames, float(train.returns[inside[-1]]) if len(inside) else math.nan,
           [float(x) for x, f in zip(evals.returns, evals.frames) if int(f // bin_frames) == b]]
    row += [float(AGGREGATES[agg](v)) if v else math.nan for (_, agg), v in zip(metrics, per_metric)]
    rows.append(row)
  return header, rows


def _cell(value) -> str:
  if isinstance(value, list):
    return ','.join(f'{v:.0f}' if float(v).is_integer() else f'{v:.1f}' for v in value)
  return '' if math.isnan(value) else f'{value:.4g}'


def format_table(header: Sequence[str], rows: Sequence[list]) -> str:
  """Fixed-width text: bin starts in millions of frames, other cells to 4 significant digits."""
  cells = [[h if i else 'M frames' for i, h in enumerate(header)]]
  cells += [[f'{row[0] / 1e6:.6g}'] + [_cell(v) for v in row[1:]] for row in rows]
  widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
  return '\n'.join('  '.join(c.rjust(w) for c, w in zip(line, widths)) for line in cells)


def write_csv(header: Sequence[str], rows: Sequence[list], path: str) -> None:
  with open(path, 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(header)
    for row in rows:
      writer.writerow([';'.join(str(v) for v in c) if isinstance(c, list)
                       else ('' if math.isnan(c) else c) for c in row])


def _bin_frames(text: str) -> float:
  try:
    value = float(text)
  except ValueError:
    value = math.nan
  if not (math.isfinite(value) and value >= 1):
    raise curves.CurvesError(f'--bin_frames must be a number of frames >= 1 (e.g. 5e5), got {text!r}.')
  return value


def main(argv=None) -> int:
  parser = curves.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('workdir', metavar='WORKDIR', help='run directory')
  parser.add_argument('--bin_frames', default='500000', help='learner frames per row (default 5e5)')
  parser.add_argument('--metrics', default=','.join(DEFAULT_METRICS),
                      help='comma-separated NAME or NAME:max (learner metrics without train/)')
  parser.add_argument('--csv', default=None, help='also write the table to this CSV file')
  try:
    args = parser.parse_args(argv)
    if args.csv and not os.path.isdir(os.path.dirname(os.path.abspath(args.csv))):
      raise curves.UsageError(f'--csv={args.csv!r}: its directory does not exist; create it first.')
    header, rows = table(args.workdir, _bin_frames(args.bin_frames), parse_metrics(args.metrics))
  except (curves.UsageError, curves.CurvesError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  print(format_table(header, rows))
  if args.csv:
    write_csv(header, rows, args.csv)
    print(f'CSV: {args.csv}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
