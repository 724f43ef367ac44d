"""Learning curves of one or several runs: episode return against frames and wall time.

Usage: python -m s3ta.analysis.curves WORKDIR [WORKDIR ...] --out=PREFIX [--labels=a,b,...]
         [--smooth_episodes=100] [--title=...] [--seeds] [--max_frames=N]

Reads each workdir's `metrics.jsonl` (either trainer writes it; partial or invalid lines are
skipped, so a running run can be plotted) and writes `PREFIX.png` (left: return against
frames, right: against wall minutes; one colour per run, training a thin light line,
evaluation markers on a solid line) and `PREFIX.csv` (`run,series,frames,wall_minutes,return,
episodes`), then prints one summary line per run. Bad arguments: one `error:` line, exit 2.

With `--seeds`, workdirs that share a label are seeds of one agent: each label gets its
training curves' mean and a band of one standard error (s.e.m., over seeds, on the frames
all its seeds reached), its seeds as faint lines, one summary line (final mean ± s.e.m.
and each seed's), and `train_mean` / `train_sem` rows in the CSV.

Frames and wall time are the learner's (`learner_frames`, `train_seconds`, which continue across
resumes), interpolated to every record's time; the training return is the mean of the last
`--smooth_episodes` episodes of all actors. How exactly: WORKSPACE.md, "Looking at the agent".
`--max_frames=N` shows every run as if it had stopped at the first learner record with N or
more frames, with the evaluations of parameters up to that record (runs of different lengths
compared on one budget; the summary says where each ended).
"""

import argparse
import csv
import dataclasses
import json
import math
import os
import sys
from typing import Iterable, NamedTuple, Optional, Sequence

import numpy as np

from s3ta.utils import storage
from s3ta.utils.metrics import JSONL_CHUNKS_DIR, JSONL_FILE, read_jsonl_lines

CSV_COLUMNS = ('run', 'series', 'frames', 'wall_minutes', 'return', 'episodes')
MAX_PLOTTED_TRAIN_POINTS = 2000  # per run; the CSV keeps every point


class CurvesError(ValueError):
  """A bad input, reported as one `error:` line and exit status 2."""


def finite_number(value) -> Optional[float]:
  """A finite real JSON number as float, else None (null, strings, booleans, NaN, inf)."""
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    return None
  return float(value) if math.isfinite(value) else None


def load_records(workdir: str) -> list:
  """The JSON objects of a workdir's metrics that have a numeric `time`, in time order.

  Lines that do not parse (a partial last line of a running run, interleaved writes) or
  are not objects with a time are skipped.
  """
  records = []
  for line in read_jsonl_lines(workdir):
    try:
      record = json.loads(line.decode('utf-8', 'replace'))
    except json.JSONDecodeError:
      continue
    if isinstance(record, dict) and finite_number(record.get('time')) is not None:
      records.append(record)
  return _by_time(records)  # chunks of several remote writers interleave only by time


def _by_time(records: Iterable[dict]) -> list:
  return sorted(records, key=lambda r: r['time'])  # stable: file order breaks ties


class LearnerTrack(NamedTuple):
  """The learner's counters over time (sorted by time) and frames per parameter version."""
  time: np.ndarray
  frames: np.ndarray
  seconds: np.ndarray
  versions: np.ndarray  # sorted, starting at 0
  version_frames: np.ndarray  # learner frames at `versions` (0 at version 0)


def learner_track(records: Sequence[dict]) -> Optional[LearnerTrack]:
  """The `learner` records with numeric `learner_frames` and `train_seconds`; None if none."""
  rows = [r for r in _by_time(records) if r.get('label') == 'learner'
          and finite_number(r.get('learner_frames')) is not None
          and finite_number(r.get('train_seconds')) is not None]
  if not rows:
    return None
  pairs = sorted((finite_number(r.get('param_version')), finite_number(r['learner_frames'])) for r in rows
                 if finite_number(r.get('param_version')) is not None)
  if not pairs or pairs[0][0] > 0:
    pairs.insert(0, (0.0, 0.0))
  return LearnerTrack(time=np.array([r['time'] for r in rows], float),
                      frames=np.array([r['learner_frames'] for r in rows], float),
                      seconds=np.array([r['train_seconds'] for r in rows], float),
                      versions=np.array([v for v, _ in pairs], float),
                      version_frames=np.array([f for _, f in pairs], float))


def x_at_times(track: LearnerTrack, times) -> tuple:
  """(frames, wall seconds) at record times: interpolated learner counters, 0 before them."""
  times = np.asarray(times, float)
  return (np.interp(times, track.time, track.frames, left=0.0),
          np.interp(times, track.time, track.seconds, left=0.0))


def frames_at_versions(track: LearnerTrack, versions) -> np.ndarray:
  """Learner frames at parameter versions, interpolated from the learner records."""
  return np.interp(np.asarray(versions, float), track.versions, track.version_frames)


def smoothed_returns(counts, means, window: int) -> tuple:
  """(mean of the last `window` episodes, episodes averaged) after each window of episodes.

  Window k holds counts[k] > 0 episodes whose mean return is means[k]. The running sum of
  returns is linear in the episode count within a window, so the sum of the last `window`
  episodes is an interpolation of the cumulative sums.
  """
  counts = np.asarray(counts, float)
  means = np.asarray(means, float)
  total = np.concatenate([[0.0], np.cumsum(counts)])
  sums = np.concatenate([[0.0], np.cumsum(counts * means)])
  start = np.maximum(total[1:] - window, 0.0)
  averaged = total[1:] - start
  return (sums[1:] - np.interp(start, total, sums)) / averaged, averaged


@dataclasses.dataclass
class Curve:
  """Points of one series of one run, in time order."""
  frames: np.ndarray
  wall_minutes: np.ndarray
  returns: np.ndarray
  episodes: np.ndarray  # NaN where unknown

  def __len__(self) -> int:
    return len(self.returns)


def training_curve(records: Sequence[dict], track: LearnerTrack, window: int) -> Curve:
  """The smoothed training return after each actor window with episodes (module docstring)."""
  rows = []
  for r in _by_time(records):
    if str(r.get('label', '')).startswith('actor_'):
      count, mean = finite_number(r.get('window_episodes')), finite_number(r.get('window_return_mean'))
      if count and count > 0 and mean is not None:
        rows.append((r['time'], count, mean))
  times, counts, means = (np.array(c, float) for c in zip(*rows)) if rows else ([], [], [])
  returns, averaged = smoothed_returns(counts, means, window)
  frames, seconds = x_at_times(track, times)
  return Curve(frames, seconds / 60.0, returns, averaged)


def evaluated_frames(record: dict, track: LearnerTrack) -> Optional[float]:
  """The learner frames of the parameters an evaluator record scored: its own `frames`, else
  those at its `param_version`; None when it has neither (then placed by its time)."""
  own, version = finite_number(record.get('frames')), finite_number(record.get('param_version'))
  if own is not None:
    return own
  return None if version is None else float(frames_at_versions(track, version))


def evaluation_curve(records: Sequence[dict], track: LearnerTrack) -> Curve:
  """One point per evaluator record with a mean return, at its parameters' frames."""
  rows = [r for r in _by_time(records)
          if r.get('label') == 'evaluator' and finite_number(r.get('mean_return')) is not None]
  times = np.array([r['time'] for r in rows], float)
  frames, seconds = x_at_times(track, times)
  for i, r in enumerate(rows):
    evaluated = evaluated_frames(r, track)
    if evaluated is not None:
      frames[i] = evaluated
  episodes = [finite_number(r.get('episodes')) for r in rows]
  return Curve(frames, seconds / 60.0, np.array([r['mean_return'] for r in rows], float),
               np.array([np.nan if e is None else e for e in episodes], float))


@dataclasses.dataclass
class Run:
  label: str
  workdir: str
  train: Curve
  evals: Curve
  final_frames: float  # the last learner record's
  final_wall_minutes: float


def cut_at_frames(records: Sequence[dict], track: LearnerTrack, max_frames: float) -> list:
  """The records up to the first learner record with `max_frames` or more frames (all if none),
  and the later evaluations of parameters up to that record.

  An evaluation finishes after the learner step that made its parameters: without the second
  part a run stopped on `max_frames` would lose the final evaluation that its stop writes.
  """
  reached = np.flatnonzero(track.frames >= max_frames)
  if not len(reached):
    return list(records)
  end, end_frames = track.time[reached[0]], track.frames[reached[0]]

  def kept(record: dict) -> bool:
    if record['time'] <= end:
      return True
    if record.get('label') != 'evaluator':
      return False
    evaluated = evaluated_frames(record, track)
    return evaluated is not None and evaluated <= end_frames

  return [r for r in records if kept(r)]


def load_run_records(workdir: str) -> tuple:
  """(records, learner track) of a workdir's metrics; CurvesError naming it when it cannot."""
  if not storage.isdir(workdir):
    what = 'is a file, not a directory' if storage.isfile(workdir) else 'does not exist'
    raise CurvesError(f'workdir {workdir!r} {what} (expected a run directory with {JSONL_FILE}).')
  path = storage.join(workdir, JSONL_FILE)
  if not (storage.isfile(path) or storage.isdir(storage.join(workdir, JSONL_CHUNKS_DIR))):
    raise CurvesError(f'workdir {workdir!r} has no {JSONL_FILE} (expected {path}, written by '
                      'launch/train.py or launch/train_single.py).')
  records = load_records(workdir)
  track = learner_track(records)
  if track is None:
    raise CurvesError(f'workdir {workdir!r} has no learner records in {JSONL_FILE} (label '
                      '"learner" with learner_frames and train_seconds); has its learner '
                      'logged yet?')
  return records, track


def load_run(workdir: str, label: str, smooth_episodes: int, max_frames: float = 0) -> Run:
  """Reads a workdir's metrics into curves; CurvesError naming it when it cannot.

  `max_frames` > 0: the run as if it had stopped when its learner first reached that many frames.
  """
  records, track = load_run_records(workdir)
  if max_frames > 0:
    records = cut_at_frames(records, track, max_frames)
    track = learner_track(records)
  return Run(label=label, workdir=workdir, train=training_curve(records, track, smooth_episodes),
             evals=evaluation_curve(records, track), final_frames=float(track.frames[-1]),
             final_wall_minutes=float(track.seconds[-1]) / 60.0)


def _fmt(value: float, spec: str) -> str:
  return '' if value is None or not math.isfinite(value) else format(value, spec)


def write_csv(runs: Sequence[Run], path: str) -> str:
  """PREFIX.csv: per run, the training points then the evaluations."""
  with open(path, 'w', newline='', encoding='utf-8') as f:
    writer = csv.writer(f)
    writer.writerow(CSV_COLUMNS)
    for run in runs:
      for series, curve in (('train', run.train), ('eval', run.evals)):
        for frames, minutes, ret, episodes in zip(curve.frames, curve.wall_minutes,
                                                  curve.returns, curve.episodes):
          writer.writerow([run.label, series, _fmt(frames, '.0f'), _fmt(minutes, '.4f'),
                           _fmt(ret, '.8g'), _fmt(episodes, '.0f')])
  return path


def _thin(n: int, limit: int) -> np.ndarray:
  """At most `limit` evenly spaced indices of n points, the last one included."""
  if n <= limit:
    return np.arange(n)
  return np.unique(np.linspace(0, n - 1, limit).round().astype(int))


def _pyplot():
  """pyplot, imported only after choosing the file-only Agg backend (no display on servers)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt


def _two_panels():
  """(figure, [frames axis, wall-minutes axis]), 1200x450 px at dpi 100, one shared y."""
  return _pyplot().subplots(1, 2, figsize=(12, 4.5), sharey=True)


def _save(fig, axes, path: str, title: str, *, wall_label: str, ylabel: str,
          handles=None) -> str:
  """Labels, grid, legend and title on both panels, then the PNG at `path`."""
  from matplotlib import ticker  # pylint: disable=g-import-not-at-top
  axes[0].set_xlabel('frames (consumed by the learner)')
  axes[0].xaxis.set_major_formatter(ticker.EngFormatter())
  axes[1].set_xlabel(wall_label)
  axes[0].set_ylabel(ylabel)
  for ax in axes:
    ax.grid(alpha=0.3)
  axes[0].legend(handles=handles, fontsize=8, loc='best')
  fig.suptitle(title, fontsize=11)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  _pyplot().close(fig)
  return path


def plot(runs: Sequence[Run], path: str, title: str, smooth_episodes: int) -> str:
  """PREFIX.png, 1200x450 px: return against frames (left) and wall minutes (right)."""
  fig, axes = _two_panels()
  from matplotlib import lines  # pylint: disable=g-import-not-at-top
  handles = []
  for i, run in enumerate(runs):
    color = f'C{i % 10}'
    keep = _thin(len(run.train), MAX_PLOTTED_TRAIN_POINTS)
    for ax, x_train, x_eval in ((axes[0], run.train.frames, run.evals.frames),
                                (axes[1], run.train.wall_minutes, run.evals.wall_minutes)):
      ax.plot(x_train[keep], run.train.returns[keep], color=color, linewidth=0.8, alpha=0.4)
      ax.plot(x_eval, run.evals.returns, 'o-', color=color, linewidth=1.4, markersize=3.5)
    handles.append(lines.Line2D([], [], color=color, linewidth=3, label=run.label))
  handles += [lines.Line2D([], [], color='grey', linewidth=0.8, alpha=0.6,
                           label=f'training (last {smooth_episodes} episodes)'),
              lines.Line2D([], [], color='grey', marker='o', markersize=3.5, linewidth=1.4,
                           label='evaluation')]
  return _save(fig, axes, path, title, wall_label='learner training time (minutes)',
               ylabel='episode return', handles=handles)


class SeedGroup(NamedTuple):
  """The seeds of one label: their mean training curve and its standard error."""
  label: str
  runs: list
  frames: np.ndarray  # a common grid up to the frames every seed reached
  wall_minutes: np.ndarray  # the seeds' mean wall time at those frames
  mean: np.ndarray
  sem: np.ndarray  # standard error of the mean over seeds (0 for one seed)


def seed_groups(runs: Sequence[Run], points: int = 200) -> list:
  """Runs grouped by label (first-seen order), each group's curves on a common frame grid."""
  groups = {}
  for run in runs:
    groups.setdefault(run.label, []).append(run)
  result = []
  for label, members in groups.items():
    empty = [run.workdir for run in members if not len(run.train)]
    if empty:
      raise CurvesError(f'seed {empty[0]!r} of {label!r} has no training episodes yet; '
                        '--seeds needs a training curve from every seed.')
    start = max(run.train.frames[0] for run in members)
    stop = min(run.train.frames[-1] for run in members)
    frames = np.linspace(start, stop, points) if stop > start else np.array([stop])
    returns = np.stack([np.interp(frames, run.train.frames, run.train.returns) for run in members])
    minutes = np.stack([np.interp(frames, run.train.frames, run.train.wall_minutes)
                        for run in members])
    sem = (returns.std(axis=0, ddof=1) / np.sqrt(len(members)) if len(members) > 1
           else np.zeros(len(frames)))
    result.append(SeedGroup(label, members, frames, minutes.mean(axis=0), returns.mean(axis=0),
                            sem))
  return result


def _seeds(group: SeedGroup) -> str:
  return f'{len(group.runs)} seed' + ('s' if len(group.runs) > 1 else '')


def group_summary_line(group: SeedGroup) -> str:
  """label, seeds, common frames, final training return mean ± s.e.m. and per seed."""
  finals = ', '.join(_fmt_return(run.train.returns[-1]) for run in group.runs)
  return (f'{group.label} ({_seeds(group)}): {group.frames[-1]:,.0f} frames reached by '
          f'all | train return {group.mean[-1]:.4g} ± {group.sem[-1]:.2g} (s.e.m.) at them | '
          f'each seed at its end: {finals}')


def write_group_csv(groups: Sequence[SeedGroup], path: str) -> str:
  """PREFIX.csv: every seed's points (run `LABEL #k`), then each group's mean and s.e.m."""
  runs = [dataclasses.replace(run, label=f'{group.label} #{k}')
          for group in groups for k, run in enumerate(group.runs)]
  write_csv(runs, path)
  with open(path, 'a', newline='', encoding='utf-8') as f:
    writer = csv.writer(f)
    for group in groups:
      for series, values in (('train_mean', group.mean), ('train_sem', group.sem)):
        for frames, minutes, value in zip(group.frames, group.wall_minutes, values):
          writer.writerow([group.label, series, _fmt(frames, '.0f'), _fmt(minutes, '.4f'),
                           _fmt(value, '.8g'), str(len(group.runs))])
  return path


def plot_groups(groups: Sequence[SeedGroup], path: str, title: str, smooth_episodes: int) -> str:
  """PREFIX.png, 1200x450 px: each label's mean training return with an s.e.m. band."""
  fig, axes = _two_panels()
  for i, group in enumerate(groups):
    color = f'C{i % 10}'
    for ax, x, seed_x in ((axes[0], group.frames, lambda run: run.train.frames),
                          (axes[1], group.wall_minutes, lambda run: run.train.wall_minutes)):
      for run in group.runs:
        keep = _thin(len(run.train), MAX_PLOTTED_TRAIN_POINTS)
        ax.plot(seed_x(run)[keep], run.train.returns[keep], color=color, linewidth=0.6, alpha=0.25)
      ax.fill_between(x, group.mean - group.sem, group.mean + group.sem, color=color, alpha=0.25,
                      linewidth=0)
      ax.plot(x, group.mean, color=color, linewidth=2,
              label=f'{group.label} ({_seeds(group)}' +
              (', mean ± s.e.m.)' if len(group.runs) > 1 else ')'))
  return _save(fig, axes, path, title,
               wall_label='learner training time (minutes; mean over seeds)',
               ylabel=f'training return (last {smooth_episodes} episodes)')


def _fmt_return(value: Optional[float]) -> str:
  return 'n/a' if value is None or not math.isfinite(value) else f'{value:.4g}'


def summary_line(run: Run) -> str:
  """label, final frames and minutes, last smoothed training return, last and best evaluation."""
  train = run.train.returns[-1] if len(run.train) else None
  last_eval = run.evals.returns[-1] if len(run.evals) else None
  best_eval = float(np.max(run.evals.returns)) if len(run.evals) else None
  averaged = f' (last {run.train.episodes[-1]:.0f} episodes)' if len(run.train) else ''
  return (f'{run.label}: {run.final_frames:,.0f} frames, {run.final_wall_minutes:.1f} min | '
          f'train return {_fmt_return(train)}{averaged} | eval return last '
          f'{_fmt_return(last_eval)}, best {_fmt_return(best_eval)} ({len(run.evals)} evaluations)')


class UsageError(Exception):
  """A command-line usage error (what argparse would print before exiting)."""


class ArgumentParser(argparse.ArgumentParser):
  """argparse that raises UsageError, so `main` prints one `error:` line (also used by learner_stats)."""

  def error(self, message):  # one `error:` line from main, not argparse's usage + exit
    raise UsageError(message)


def _output_prefix(out: str) -> str:
  prefix = out[:-4] if out.lower().endswith(('.png', '.csv')) else out
  if not prefix or prefix.endswith(('/', os.sep)) or os.path.isdir(prefix):
    raise CurvesError(f'--out must be a file prefix (PREFIX.png and PREFIX.csv are written), '
                      f'got {out!r}.')
  directory = os.path.dirname(prefix)
  if directory and not os.path.isdir(directory):
    raise CurvesError(f'--out directory {directory!r} does not exist (--out={out}); create it '
                      'or choose an existing one.')
  return prefix


def _labels(workdirs: Sequence[str], labels: Optional[str], seeds: bool = False) -> list:
  if labels is None:
    names = [storage.basename(storage.absolute(w)) for w in workdirs]
  else:
    names = labels.split(',')
    if len(names) != len(workdirs):
      raise CurvesError(f'--labels has {len(names)} entries ({labels!r}) but {len(workdirs)} '
                        'workdirs were given; give one label per workdir, comma-separated.')
    empty = [i + 1 for i, name in enumerate(names) if not name.strip()]
    if empty:
      raise CurvesError(f'--labels entry {empty[0]} is empty ({labels!r}); every label must be '
                        'non-empty.')
    names = [name.strip() for name in names]
  seen = {}
  for name, workdir in zip(names, workdirs):
    if name in seen and not seeds:
      raise CurvesError(f'workdirs {seen[name]!r} and {workdir!r} are both labelled {name!r}; '
                        'pass --labels with distinct names, or --seeds if they are seeds of '
                        'one agent.')
    seen[name] = workdir
  return names


def _max_frames(text: Optional[str]) -> int:
  """`--max_frames` as an integer >= 1 (underscores and scientific notation allowed); 0 if unset."""
  if text is None:
    return 0
  try:
    value = float(text)
  except ValueError:
    value = 0.0
  if not (math.isfinite(value) and value >= 1 and value == int(value)):
    raise CurvesError(f'--max_frames must be an integer >= 1 (e.g. 5000000 or 5e6), got {text!r}.')
  return int(value)


def main(argv=None) -> int:
  parser = ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('workdirs', nargs='+', metavar='WORKDIR', help='run directories')
  parser.add_argument('--out', required=True, help='output prefix: writes PREFIX.png, PREFIX.csv')
  parser.add_argument('--labels', default=None,
                      help='comma-separated run names, one per workdir (default: basenames)')
  parser.add_argument('--smooth_episodes', default='100',
                      help='training return: mean of the last N episodes (default 100)')
  parser.add_argument('--title', default=None, help='figure title')
  parser.add_argument('--seeds', action='store_true',
                      help='workdirs sharing a label are seeds: plot mean ± s.e.m. per label')
  parser.add_argument('--max_frames', default=None,
                      help='show each run up to the first learner record with N or more frames')
  try:
    args = parser.parse_args(argv)
    try:
      smooth = int(args.smooth_episodes)
    except ValueError:
      smooth = 0
    if smooth < 1:
      raise CurvesError(f'--smooth_episodes must be an integer >= 1, got '
                        f'{args.smooth_episodes!r}.')
    max_frames = _max_frames(args.max_frames)
    labels = _labels(args.workdirs, args.labels, args.seeds)
    prefix = _output_prefix(args.out)
    runs = [load_run(w, label, smooth, max_frames) for w, label in zip(args.workdirs, labels)]
    groups = seed_groups(runs) if args.seeds else None
  except (UsageError, CurvesError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  title = (args.title if args.title is not None
           else f'Episode return: {", ".join(dict.fromkeys(labels))}')
  if groups is not None:
    lines = [group_summary_line(group) for group in groups]
    csv_path = write_group_csv(groups, prefix + '.csv')
    png_path = plot_groups(groups, prefix + '.png', title, smooth)
  else:
    lines = [summary_line(run) for run in runs]
    csv_path = write_csv(runs, prefix + '.csv')
    png_path = plot(runs, prefix + '.png', title, smooth)
  for line in lines + [f'Plot: {png_path}', f'CSV: {csv_path}']:
    print(line)
  return 0


if __name__ == '__main__':
  sys.exit(main())
