"""Held-out R^2 against updates from `attention_probe.py` logs, one line per log, as a PNG.

  python benchmarks/plot_probe.py --out=docs/curves/probe.png --title="210x160, B 32" \
      resnet.log="ResNet-LSTM" s3ta.log="S3TA"
"""

import argparse
import re

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

REPORT = re.compile(r'step +(\d+) +held-out R\^2 ([-+]?\d+\.\d+)')
FLOOR = -0.2  # R^2 below this is drawn at it (one bad evaluation would squash the rest)


def read(path: str) -> tuple[list[int], list[float]]:
  steps, r2 = [], []
  with open(path) as f:
    for line in f:
      match = REPORT.search(line)
      if match:
        steps.append(int(match.group(1)))
        r2.append(max(float(match.group(2)), FLOOR))
  if not steps:
    raise SystemExit(f'error: no "step N  held-out R^2 X" lines in {path}')
  return steps, r2


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--out', required=True, help='PNG path')
  parser.add_argument('--title', default='')
  parser.add_argument('runs', nargs='+', metavar='LOG=LABEL')
  args = parser.parse_args()
  fig, ax = plt.subplots(figsize=(6, 4))
  for run in args.runs:
    path, _, label = run.partition('=')
    ax.plot(*read(path), label=label or path)
  ax.set(title=args.title, xlabel='updates', ylim=(FLOOR - 0.02, 1.02),
         ylabel=f'held-out R^2 (floor {FLOOR})')
  ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(args.out, dpi=80)
  print(f'wrote {args.out}')


if __name__ == '__main__':
  main()
