"""Memory soak of a running program: each node's resident memory (RSS) sampled every period.

Attaches to a launcher process (`python -m launch.train ...` or `launch.train_single`) and
samples the RSS of it and of every descendant once per `--period_s`. Nodes are named from
the `pid` field of their records in `<workdir>/metrics.jsonl` (learner, actor_i,
evaluator); a node that writes no records (the Reverb server) keeps `pid_<n>`. At the end
(the launcher exited, or `--minutes` passed) it prints one line per node with its RSS at
the end of the warm-up and at the end, and the growth between them, and writes every
sample as CSV. Growth after warm-up shows a leak; the target is < 5 % (issue 10).

  python benchmarks/soak.py --launcher_pid=PID --workdir=DIR [--minutes=30] [--period_s=60] \
      [--warmup_minutes=5] [--csv=soak.csv]
"""

import argparse
import csv
import json
import os
import sys
import time

import psutil


class NodeNames:
  """{pid: label} from the records of metrics.jsonl, reading only what was appended since."""

  def __init__(self, workdir: str):
    self._path = os.path.join(workdir, 'metrics.jsonl')
    self._offset = 0
    self.names: dict = {}

  def update(self) -> dict:
    if not os.path.exists(self._path):
      return self.names
    with open(self._path, 'rb') as f:
      f.seek(self._offset)
      data = f.read()
    end = data.rfind(b'\n') + 1  # complete lines only
    self._offset += end
    for line in data[:end].decode('utf-8', 'replace').splitlines():
      try:
        record = json.loads(line)
      except json.JSONDecodeError:
        continue
      if 'pid' in record and 'label' in record:
        self.names[int(record['pid'])] = record['label']  # the latest label wins
    return self.names


def node_names(workdir: str) -> dict:
  """{pid: label} from the whole of metrics.jsonl."""
  return NodeNames(workdir).update()


def sample(launcher: psutil.Process) -> dict:
  """{pid: rss bytes} of the launcher and its descendants alive now."""
  rss = {}
  for process in [launcher] + launcher.children(recursive=True):
    try:
      rss[process.pid] = process.memory_info().rss
    except psutil.Error:  # exited between listing and reading
      continue
  return rss


def growth_table(rows: list, names: dict, launcher_pid: int, warmup_s: float) -> list:
  """[(name, rss at the end of warm-up, rss at the end, growth)] per node seen after warm-up."""
  start = rows[0]['time']
  table = []
  for pid in sorted({r['pid'] for r in rows}):
    own = [r for r in rows if r['pid'] == pid and r['time'] - start >= warmup_s]
    if len(own) < 2:
      continue
    name = 'launcher' if pid == launcher_pid else names.get(pid, f'pid_{pid}')
    first, last = own[0]['rss'], own[-1]['rss']
    table.append((name, first, last, (last - first) / first))
  return table


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--launcher_pid', type=int, required=True)
  parser.add_argument('--workdir', required=True)
  parser.add_argument('--minutes', type=float, default=30.0)
  parser.add_argument('--period_s', type=float, default=60.0)
  parser.add_argument('--warmup_minutes', type=float, default=5.0)
  parser.add_argument('--csv', default=None, help='Write every sample here.')
  args = parser.parse_args(argv)
  try:
    launcher = psutil.Process(args.launcher_pid)
  except psutil.NoSuchProcess:
    print(f'error: no process with --launcher_pid={args.launcher_pid}.', file=sys.stderr)
    return 2
  rows, start = [], time.time()
  names_reader = NodeNames(args.workdir)
  out = open(args.csv, 'w', newline='') if args.csv else None  # pylint: disable=consider-using-with
  writer = csv.writer(out) if out else None
  if writer:
    writer.writerow(['seconds', 'node', 'pid', 'rss_mib'])
  while time.time() - start < args.minutes * 60 and launcher.is_running():
    now = time.time()
    samples = [{'time': now, 'pid': pid, 'rss': rss} for pid, rss in sample(launcher).items()]
    rows.extend(samples)
    if writer:  # row by row, so an interrupted soak keeps what it measured
      names = names_reader.update()
      for r in samples:
        name = 'launcher' if r['pid'] == args.launcher_pid else names.get(r['pid'], f'pid_{r["pid"]}')
        writer.writerow([f'{now - start:.0f}', name, r['pid'], f'{r["rss"] / 2**20:.1f}'])
      out.flush()
    time.sleep(max(0.0, args.period_s - (time.time() - now)))
  if out:
    out.close()
  if not rows:
    print('error: no samples taken.', file=sys.stderr)
    return 1
  names = names_reader.update()
  minutes = (rows[-1]['time'] - rows[0]['time']) / 60
  print(f'{minutes:.1f} min sampled, growth after {args.warmup_minutes:g} min of warm-up:')
  for name, first, last, growth in growth_table(rows, names, args.launcher_pid,
                                                args.warmup_minutes * 60):
    print(f'  {name:12s} {first / 2**20:8.1f} MiB -> {last / 2**20:8.1f} MiB  {100 * growth:+6.2f} %')
  return 0


if __name__ == '__main__':
  sys.exit(main())
