#!/usr/bin/env bash
# Runs the pure-JAX core tests (pytest marker `core`) on current JAX/Flax, in ./.venv-next
# (Python >= 3.11, created or reused here), so the core stays runnable on machines that only
# have the newer stack. rlax does not import there (TFP breaks on JAX 0.11); the core then
# uses its V-trace stand-in (s3ta/learning/rlax_standin.py) and says so in one line.
# Usage: bash scripts/check_next_stack.sh [extra pytest args, e.g. -x or -k losses]
# A test module joins by declaring `pytestmark = pytest.mark.core` (it must then import
# nothing from TF, Reverb, Launchpad or EnvPool).
set -euo pipefail
cd "$(dirname "$0")/.."

# Exact pins of everything installed here (what /tmp/venv312 was checked with).
PINS=(jax==0.11.2 jaxlib==0.11.2 flax==0.12.12 optax==0.2.8 chex==0.1.92 ml-collections==1.1.0
      numpy==2.5.5 msgpack==1.2.4 pytest==9.2.0 pytest-xdist==3.8.0 execnet==2.1.2)

find_python() {
  if [ -n "${S3TA_NEXT_PYTHON:-}" ]; then echo "$S3TA_NEXT_PYTHON"; return; fi
  if command -v pyenv >/dev/null 2>&1 && PYENV_VERSION=3.12.1 pyenv which python3.12 >/dev/null 2>&1; then
    PYENV_VERSION=3.12.1 pyenv which python3.12; return
  fi
  for candidate in python3.12 python3.11; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))' 2>/dev/null; then
      command -v "$candidate"; return
    fi
  done
  echo "error: Python 3.11+ not found (JAX 0.11 needs it). Install it (e.g. 'pyenv install" \
       "3.12.1') or set S3TA_NEXT_PYTHON=/path/to/python3.12." >&2
  exit 1
}

venv=.venv-next
stamp=$venv/.pins.sha
want=$(printf '%s\n' "${PINS[@]}" | sha256sum | cut -d' ' -f1)
if [ ! -x $venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  if [ ! -x $venv/bin/python ]; then
    "$(find_python)" -m venv $venv
  fi
  echo "[check_next_stack] installing ${PINS[*]} into $venv (first run: a few minutes)" >&2
  $venv/bin/python -m pip install -q "${PINS[@]}"
  echo "$want" > "$stamp"
fi

# Only the modules marked `core` as a whole: pytest imports every module it collects, even
# with -m, and the others need TF, Reverb, EnvPool, PIL... that this venv lacks.
mapfile -t modules < <(grep -l '^pytestmark = pytest.mark.core' tests/test_*.py)
if [ ${#modules[@]} -eq 0 ]; then
  echo "error: no test module in tests/ has 'pytestmark = pytest.mark.core'." >&2
  exit 1
fi
# `python -m pytest` from the repository root puts it on sys.path, so s3ta needs no install
# (setup.py pins the old stack).
$venv/bin/python -c 'import jax, flax, sys; print(f"[check_next_stack] Python {sys.version.split()[0]},"
                    f" jax {jax.__version__}, flax {flax.__version__}", file=sys.stderr)'
echo "[check_next_stack] python -m pytest -q -m core ${modules[*]} $*" >&2
exec $venv/bin/python -m pytest -q -m core "${modules[@]}" "$@"
