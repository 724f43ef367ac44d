"""Summarises a PBT run: the best member's lineage (text) and fitness/hyperparameters (PNG).

Usage: python -m s3ta.pbt.report --workdir=DIR [--out=DIR/pbt_report.png]

Reads `pbt_state.json`, `pbt_events.jsonl` and `pbt_fitness.jsonl` written by the
controller (`s3ta.pbt.controller`); works while the run is still going.
"""

import argparse
import collections
import os
import sys
from typing import Optional

from s3ta.pbt import storage


def _fmt_hp(hp: dict) -> str:
  return ', '.join(f'{k}={v:.4g}' for k, v in sorted(hp.items()))


def load(workdir: str) -> tuple:
  state_path = os.path.join(workdir, storage.STATE_FILE)
  if not os.path.exists(state_path):
    raise FileNotFoundError(f'No PBT state in {workdir!r} (expected {storage.STATE_FILE}); '
                            'is this the --workdir of a `launch.pbt` run?')
  state = storage.read_json(state_path)
  events = list(storage.read_jsonl(os.path.join(workdir, storage.EVENTS_FILE)))
  fitness = list(storage.read_jsonl(os.path.join(workdir, storage.FITNESS_FILE)))
  return state, events, fitness


def best_member(state: dict, fitness_lines: list) -> Optional[dict]:
  """The member with the highest current fitness (else the best last-polled fitness)."""
  members = state['members']
  known = [m for m in members if m.get('fitness') is not None]
  if known:
    return max(known, key=lambda m: (m['fitness'], -m['member_id']))
  last = {}
  for line in fitness_lines:
    if line.get('fitness') is not None:
      last[line['member']] = line['fitness']
  if last:
    best = max(last, key=lambda k: (last[k], -k))
    return members[best]
  return members[0] if members else None


def lineage_text(member: dict, start_time: float) -> list:
  lines = [f'Best member: {member["member_id"]} (fitness {member.get("fitness")}, generation '
           f'{member.get("generation", 0)}, {member.get("frames", 0)} frames)',
           f'Hyperparameters now: {_fmt_hp(member["hyperparams"])}', 'Lineage of its weights:']
  for entry in member.get('lineage', []):
    when = f't={entry["time"] - start_time:8.1f}s frames={entry["frames"]:>10}'
    if entry['event'] == 'init':
      what = f'init     member {entry["member"]}'
    elif entry['event'] == 'exploit':
      fit = '' if entry.get('fitness') is None else f' (donor fitness {entry["fitness"]:.4g})'
      what = f'exploit  member {entry["member"]} <- weights of member {entry["donor"]}{fit}'
    else:
      what = f'explore  member {entry["member"]}'
    lines.append(f'  {when}  {what}: {_fmt_hp(entry["hyperparams"])}')
  return lines


def plot(state: dict, events: list, fitness_lines: list, out: str) -> str:
  # pyplot only after choosing the file-only Agg backend (no display on servers).
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  names = sorted(state['members'][0]['hyperparams']) if state['members'] else []
  evolved = [n for n in names if n in state['config']['evolve']] or names
  start = min([l['time'] for l in fitness_lines] + [m['lineage'][0]['time'] for m in state['members']
                                                     if m.get('lineage')] or [0.0])
  series = collections.defaultdict(lambda: collections.defaultdict(list))
  for line in fitness_lines:
    s = series[line['member']]
    s['t'].append((line['time'] - start) / 60)
    s['fitness'].append(line['fitness'] if line['fitness'] is not None else float('nan'))
  # Hyperparameter curves: polled values plus each event's new values at the event time.
  hp_points = collections.defaultdict(list)
  for line in fitness_lines:
    hp_points[line['member']].append(((line['time'] - start) / 60, line['hyperparams']))
  for event in events:
    hp_points[event['member']].append(((event['time'] - start) / 60, event['new_hyperparams']))
  fig, axes = plt.subplots(1 + len(evolved), 1, figsize=(9, 2.4 * (1 + len(evolved))), sharex=True)
  axes = list(axes) if len(evolved) else [axes]
  colors = plt.rcParams['axes.prop_cycle'].by_key()['color']
  for member_id in sorted(series):
    s, color = series[member_id], colors[member_id % len(colors)]
    axes[0].plot(s['t'], s['fitness'], '.-', color=color, label=f'member {member_id}', markersize=3)
    points = sorted(hp_points[member_id], key=lambda p: p[0])
    for ax, name in zip(axes[1:], evolved):
      ax.step([p[0] for p in points], [p[1].get(name, float('nan')) for p in points], where='post',
              color=color)
  for event in events:
    t = (event['time'] - start) / 60
    color = colors[event['member'] % len(colors)]
    if event['event'] == 'exploit':
      axes[0].axvline(t, color=color, alpha=0.3, linestyle='--')
      axes[0].annotate(f'{event["donor"]}→{event["member"]}', (t, 1.0), xycoords=('data', 'axes fraction'),
                       fontsize=7, color=color, ha='left', va='top')
    else:
      for ax, name in zip(axes[1:], evolved):
        if name in event.get('changed', []):
          ax.plot([t], [event['new_hyperparams'][name]], 'o', color=color, markersize=4, fillstyle='none')
  axes[0].set_ylabel('fitness\n(capped HNS)')
  axes[0].legend(fontsize=7, loc='lower right')
  axes[0].set_title(f'PBT: {len(state["members"])} members, {state["counters"].get("exploits", 0)} exploits, '
                    f'{state["counters"].get("explores", 0)} explores (--: exploit, o: explore)')
  for ax, name in zip(axes[1:], evolved):
    ax.set_ylabel(name)
    ax.set_yscale('log')
  axes[-1].set_xlabel('minutes since start')
  fig.tight_layout()
  fig.savefig(out, dpi=110)
  plt.close(fig)
  return out


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--workdir', required=True, help='the --workdir of a launch.pbt run')
  parser.add_argument('--out', default=None, help='PNG path (default <workdir>/pbt_report.png)')
  args = parser.parse_args(argv)
  try:
    state, events, fitness_lines = load(args.workdir)
  except (FileNotFoundError, ValueError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  start = min([l['time'] for l in fitness_lines] or [0.0])
  member = best_member(state, fitness_lines)
  if member is not None:
    if member.get('lineage'):
      start = min(start, member['lineage'][0]['time']) if fitness_lines else member['lineage'][0]['time']
    print('\n'.join(lineage_text(member, start)))
  counts = collections.Counter(e['event'] for e in events)
  print(f'Events: {counts.get("exploit", 0)} exploit, {counts.get("explore", 0)} explore; '
        f'{state["counters"].get("polls", 0)} polls.')
  out = plot(state, events, fitness_lines, args.out or os.path.join(args.workdir, 'pbt_report.png'))
  print(f'Plot: {out}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
