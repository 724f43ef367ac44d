"""Robustness of a Catch recipe over seeds: the learning test's criteria, one line per seed.

Trains `--config` (with any `--config.<key>` overrides) once per seed in the
single-machine trainer and reports, from the running mean of the last 500 training
returns (as tests/test_learning.py does): the agent step where it first reaches 0.9,
the last step where it is below 0.9 (the test wants this in the first half), the
lowest mean after first reaching 0.9, and the mean return of the final parameters on
200 fresh episodes. The running means go to `<out>/seed_<n>.csv` as they come.

  python benchmarks/catch_seeds.py --config=experiments/catch.py --seeds=0,1,2 --out=DIR \
      [--config.learner.learning_rate=...] [--plot=curve.png]
  python benchmarks/catch_seeds.py --seeds= --out=DIR --plot=curve.png   # redraw only
  python benchmarks/catch_seeds.py --seeds= --out=DIR_A --compare=DIR_B,... --labels=A,B,... \
      --plot=curve.png   # one panel per folder, side by side
"""

import collections
import json
import os
import sys
import tempfile

from absl import app
from absl import flags
from ml_collections import config_flags

from launch.cli import parse_flags
from launch.train_single import train
from s3ta.acting.evaluator import play_episodes
from s3ta.envs import factory

_CONFIG = config_flags.DEFINE_config_file('config', 'experiments/catch.py', 'Catch config.')
_SEEDS = flags.DEFINE_list('seeds', ['0', '1', '2'], 'Seeds to train, one run each.')
_OUT = flags.DEFINE_string('out', None, 'Folder for the per-seed CSVs and summary.jsonl.')
_PLOT = flags.DEFINE_string('plot', None, 'Also draw every seed_*.csv in --out into this PNG.')
_COMPARE = flags.DEFINE_list('compare', [], 'More result folders, drawn as panels beside --out.')
_LABELS = flags.DEFINE_list('labels', [], 'Panel titles, one per folder (default: folder names).')
_MIDPOINT = flags.DEFINE_float('midpoint_k', 200, 'Where the plot marks the middle of the run (K '
                               'agent steps): experiments/catch.py runs 400 K.')
_WINDOW = 500  # episodes behind each running mean, as in the learning test
_LEARNED = 0.9


def run_seed(config, seed: int, out: str) -> dict:
  """One training run; the test's criteria as a dict."""
  config.seed = seed
  config.evaluator.enabled = False
  recent = collections.deque(maxlen=_WINDOW)
  stats = {'seed': seed, 'first_learned': None, 'last_below': 0, 'min_after_learned': None}
  with open(os.path.join(out, f'seed_{seed}.csv'), 'w') as csv:
    csv.write('agent_steps,mean_return\n')

    def on_episodes(steps, returns):
      recent.extend(returns)
      if len(recent) < _WINDOW:
        return
      mean = sum(recent) / _WINDOW
      csv.write(f'{steps},{mean:.4f}\n')
      csv.flush()
      if mean < _LEARNED:
        stats['last_below'] = steps
      if stats['first_learned'] is None and mean >= _LEARNED:
        stats['first_learned'] = steps
      if stats['first_learned'] is not None:
        low = stats['min_after_learned']
        stats['min_after_learned'] = mean if low is None else min(low, mean)

    with tempfile.TemporaryDirectory() as workdir:
      result = train(config, workdir, log=lambda _: None, on_episodes=on_episodes)
  env = factory.make_env(config.env, 32, seed=12345)
  returns, _ = play_episodes(result.network, result.params, env, 200, rng_key=[0, 7])
  stats.update(agent_steps=result.env_steps, reason=result.reason,
               final_eval=round(sum(returns) / len(returns), 3),
               stays_learned=stats['last_below'] <= result.env_steps / 2)
  return stats


def main(argv):
  del argv
  if not _OUT.value:
    sys.exit('error: --out is required (a folder for the results).')
  os.makedirs(_OUT.value, exist_ok=True)
  failures = 0
  for seed in filter(None, _SEEDS.value):
    stats = run_seed(_CONFIG.value, int(seed), _OUT.value)
    failures += not (stats['stays_learned'] and stats['final_eval'] >= _LEARNED)
    line = json.dumps(stats)
    print(line, flush=True)
    with open(os.path.join(_OUT.value, 'summary.jsonl'), 'a') as f:
      f.write(line + '\n')
  if _SEEDS.value and _SEEDS.value != ['']:
    print(f'{len(_SEEDS.value) - failures}/{len(_SEEDS.value)} seeds learned and stayed learned.')
  if _PLOT.value:
    folders = [_OUT.value] + _COMPARE.value
    if _LABELS.value and len(_LABELS.value) != len(folders):
      sys.exit(f'error: --labels has {len(_LABELS.value)} titles for {len(folders)} folders.')
    plot(folders, _PLOT.value, _LABELS.value or [os.path.basename(f.rstrip('/')) for f in folders])


def plot(folders: list, path: str, titles: list) -> None:
  """Running mean against agent steps, one line per seed_*.csv and one panel per folder, with the
  test's 0.9 and midpoint."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, len(folders), figsize=(7 * len(folders) ** 0.75, 3.5), dpi=90,
                           sharey=True, squeeze=False)
  for out, title, ax in zip(folders, titles, axes[0]):
    _draw_seeds(ax, out)
    if len(folders) > 1:
      ax.set_title(title, fontsize=9)
  fig.tight_layout()
  fig.savefig(path)
  print(f'wrote {path}')


def _draw_seeds(ax, out: str) -> None:
  for name in sorted(os.listdir(out)):
    if name.startswith('seed_') and name.endswith('.csv'):
      rows = [line.split(',') for line in open(os.path.join(out, name)).read().split()[1:]]
      ax.plot([int(r[0]) / 1e3 for r in rows], [float(r[1]) for r in rows], lw=0.8,
              label=name[:-4].replace('_', ' '))
  ax.axhline(_LEARNED, color='gray', ls='--', lw=0.7)
  ax.axvline(_MIDPOINT.value, color='gray', ls=':', lw=0.7)
  ax.set(xlabel='agent steps (K)', ylabel=f'mean of last {_WINDOW} returns', ylim=(-1, 1.05))
  ax.legend(loc='lower right', fontsize=8)


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
