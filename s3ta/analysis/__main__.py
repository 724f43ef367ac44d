"""`python -m s3ta.analysis <subcommand> ...` (see s3ta/analysis/cli.py)."""

import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import s3ta  # noqa: E402,F401  (rlax before anything can pull in TF)
from s3ta.analysis import cli  # noqa: E402

if __name__ == '__main__':
  sys.exit(cli.main())
