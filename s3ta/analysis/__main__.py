"""`python -m s3ta.analysis <subcommand> ...` (see s3ta/analysis/cli.py)."""

import os
import signal
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import s3ta  # noqa: E402,F401  (rlax before anything can pull in TF)
from s3ta.analysis import cli  # noqa: E402


def _exit_on_sigterm(signum, frame):
  """SIGTERM unwinds like Ctrl-C, so `finally` blocks close the VizDoom engines and gym windows
  (by default the process would die at once and leave the engine processes running)."""
  raise SystemExit(128 + signum)


if __name__ == '__main__':
  signal.signal(signal.SIGTERM, _exit_on_sigterm)
  sys.exit(cli.main())
