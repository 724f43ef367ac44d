"""Fork a run at one of its checkpoints into a new workdir, to continue it with other settings.

Usage: python -m launch.fork --from=WORKDIR --step=N --to=NEW_WORKDIR
       then: python -m launch.train_single (or launch.train) --config=... --workdir=NEW_WORKDIR
             --config.learner.learning_rate=... (any override)

Copies `WORKDIR/checkpoints/ckpt_N` into `NEW_WORKDIR/checkpoints/` and the metrics records
written up to that checkpoint (by wall time; records marked final left out) into
`NEW_WORKDIR/metrics.jsonl`, so `s3ta.analysis.curves` draws the fork on its trunk. Rerunning
a trainer on the new workdir resumes from ckpt_N; hyperparameters changed on its command line
take effect (`learner_core.resume_with_config`). The source is only read. Local paths only.
Bad arguments (no such checkpoint, a destination that already holds a run): one `error:`
line naming the value and what is allowed, exit 2; nothing is written.
"""

import argparse
import json
import os
import shutil
import sys

from s3ta.utils import checkpoint as checkpoint_lib
from s3ta.utils.metrics import JSONL_FILE, read_jsonl_lines


class ForkError(ValueError):
  """A bad argument, reported as one `error:` line and exit status 2."""


def trunk_lines(workdir: str, until: float) -> list:
  """The raw metrics lines (bytes) of `workdir` with a time <= `until`, without final records."""
  kept = []
  for line in read_jsonl_lines(workdir):
    try:
      record = json.loads(line)
    except ValueError:
      continue  # a partial line of a run that was still writing
    if isinstance(record, dict) and isinstance(record.get('time'), (int, float)) \
        and record['time'] <= until and not record.get('final'):
      kept.append(line)
  return kept


def fork(source: str, step: int, destination: str) -> tuple:
  """Copies checkpoint `step` of `source` and its metrics trunk into `destination`.

  Returns (checkpoint path written, metrics lines kept). ForkError when the checkpoint is
  absent or the destination already holds checkpoints or metrics.
  """
  available = dict(checkpoint_lib.list_checkpoints(checkpoint_lib.checkpoint_dir(source)))
  if step not in available:
    raise ForkError(f'--step={step}: {source!r} has no complete checkpoint ckpt_{step}; available '
                    f'steps: {sorted(available) or "none"}.')
  if os.path.exists(destination) and not os.path.isdir(destination):
    raise ForkError(f'--to={destination!r} is a file; fork into a new or empty directory.')
  for name in (checkpoint_lib.checkpoint_dir(destination), os.path.join(destination, JSONL_FILE)):
    if os.path.exists(name):
      raise ForkError(f'--to={destination!r} already holds a run ({name} exists); fork into a new '
                      'or empty directory.')
  try:  # a fork resumes from the copy: it must decode as a resume would read it
    saved_at = checkpoint_lib.checked_metadata(available[step])['time']
  except (ValueError, KeyError) as e:
    raise ForkError(f'--step={step}: {e} Other steps of {source!r}: '
                    f'{sorted(set(available) - {step}) or "none"}.') from None
  lines = trunk_lines(source, saved_at)
  target = os.path.join(checkpoint_lib.checkpoint_dir(destination), os.path.basename(available[step]))
  try:
    shutil.copytree(available[step], target)
    with open(os.path.join(destination, JSONL_FILE), 'wb') as f:
      f.write(b''.join(line + b'\n' for line in lines))
  except OSError as e:
    raise ForkError(f'--to={destination!r} cannot be written ({e.strerror or e}).') from None
  return target, len(lines)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--from', dest='source', required=True, help='the run to fork (its workdir)')
  parser.add_argument('--step', required=True, help='learner step of the checkpoint to fork at')
  parser.add_argument('--to', dest='destination', required=True, help='the new workdir')
  args = parser.parse_args(argv)  # argparse's own errors exit 2 too
  try:
    try:
      step = int(args.step)
    except ValueError:
      raise ForkError(f'--step must be an integer checkpoint step, got {args.step!r}.') from None
    if not os.path.isdir(args.source):
      raise ForkError(f'--from={args.source!r} is not a directory (expected a run workdir with '
                      'checkpoints/).')
    target, kept = fork(args.source, step, args.destination)
  except ForkError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  print(f'[fork] {target} from {args.source} at step {step}; {kept} metrics records kept. Continue '
        f'with: python -m launch.train_single --config=... --workdir={args.destination} '
        '[--config.x=y ...]')
  return 0


if __name__ == '__main__':
  sys.exit(main())
