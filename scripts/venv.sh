#!/usr/bin/env bash
# Creates (or reuses) ./.venv with Python 3.10 and the pinned requirements, then runs
# the given command inside it. Usage: bash scripts/venv.sh python -m pytest tests
set -euo pipefail
cd "$(dirname "$0")/.."

find_python() {
  if [ -n "${S3TA_PYTHON:-}" ]; then echo "$S3TA_PYTHON"; return; fi
  if command -v pyenv >/dev/null 2>&1 && PYENV_VERSION=3.10.13 pyenv which python3.10 >/dev/null 2>&1; then
    PYENV_VERSION=3.10.13 pyenv which python3.10; return
  fi
  for candidate in python3.10 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))'; then
      command -v "$candidate"; return
    fi
  done
  echo "error: Python 3.10 not found (Launchpad 0.5.2 needs Python <= 3.10). Install it (e.g." \
       "'pyenv install 3.10.13') or set S3TA_PYTHON=/path/to/python3.10." >&2
  exit 1
}

stamp=.venv/.requirements.sha
want=$(cat requirements.txt setup.py | sha256sum | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  if [ ! -x .venv/bin/python ]; then
    "$(find_python)" -m venv .venv
  fi
  echo "[venv] installing pinned requirements into .venv (first run: a few minutes)" >&2
  .venv/bin/python -m pip install -q -r requirements.txt
  .venv/bin/python -m pip install -q --no-deps -e .
  echo "$want" > "$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"
exec "$@"
