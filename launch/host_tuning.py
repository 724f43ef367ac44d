"""Runs a launcher under glibc's huge-page malloc, so XLA:CPU's large buffers stop page-faulting.

XLA:CPU allocates each step's large buffers (attention maps, activations) with malloc, and
glibc serves every block over 32 MiB with a fresh mmap that it unmaps again on free. So every
step touches those pages anew: one PPO update of g-AWRL under three distractor games (128
tokens, [259, 4, 128, 128] maps) took 1.85 M minor page faults. glibc's tunable
`glibc.malloc.hugetlb=1` (glibc >= 2.35) backs those blocks with transparent huge pages: 5-11 K
faults, and the update 1.3x faster (BENCHMARKS.md, "XLA:CPU's large buffers and glibc's malloc").

A tunable is read when a process starts, so `reexec_with_host_tuning()` re-executes the launcher
(same pid, same argv) once with `GLIBC_TUNABLES` extended; Launchpad's node processes inherit it.
Hand-written: no library sets glibc tunables for a running program. A user's own
`GLIBC_TUNABLES` that already names `glibc.malloc.hugetlb` is left as it is, so
`GLIBC_TUNABLES=glibc.malloc.hugetlb=0` turns this off.
"""

import os
import platform
import sys
from typing import Mapping, Optional

HUGETLB = 'glibc.malloc.hugetlb'
MIN_GLIBC = (2, 35)  # the first glibc with glibc.malloc.hugetlb


def _glibc_version() -> Optional[tuple]:
  """(major, minor) of the C library this process runs on, or None if it is not glibc."""
  name, version = platform.libc_ver()
  if name != 'glibc':
    return None
  try:
    return tuple(int(part) for part in version.split('.')[:2])
  except ValueError:
    return None


def tuned_environment(environ: Mapping[str, str],
                      glibc: Optional[tuple]) -> Optional[dict]:
  """The environment to re-run under, or None when there is nothing to change.

  None on anything but glibc >= 2.35, and when `GLIBC_TUNABLES` already names the setting
  (set by the user, or by the re-execution itself).
  """
  if glibc is None or glibc < MIN_GLIBC:
    return None
  tunables = environ.get('GLIBC_TUNABLES', '')
  if any(item.split('=')[0] == HUGETLB for item in tunables.split(':')):
    return None
  env = dict(environ)
  env['GLIBC_TUNABLES'] = ':'.join(filter(None, [tunables, f'{HUGETLB}=1']))
  return env


def reexec_with_host_tuning() -> None:
  """Replaces this process with itself under `tuned_environment`; returns if nothing changes.

  Call it first thing in a launcher's `__main__` block, before any thread or device starts.
  """
  env = tuned_environment(os.environ, _glibc_version())
  if env is None:
    return
  sys.stdout.flush()
  sys.stderr.flush()
  os.execve(sys.executable, list(sys.orig_argv), env)
