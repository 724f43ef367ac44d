"""launch/host_tuning.py: the launchers' re-execution under glibc's huge-page malloc."""

import os
import subprocess
import sys

import pytest

from launch import host_tuning

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GLIBC = host_tuning._glibc_version()  # pylint: disable=protected-access
NEEDS_GLIBC_HUGETLB = pytest.mark.skipif(GLIBC is None or GLIBC < host_tuning.MIN_GLIBC,
                                         reason='needs glibc >= 2.35')


def _transparent_huge_pages() -> str:
  try:
    with open('/sys/kernel/mm/transparent_hugepage/enabled') as f:
      return f.read().split('[')[1].split(']')[0]  # e.g. 'always [madvise] never' -> 'madvise'
  except (OSError, IndexError):
    return 'never'


def test_adds_the_tunable_and_keeps_the_rest_of_the_environment():
  env = host_tuning.tuned_environment({'PATH': '/bin'}, glibc=(2, 36))
  assert env == {'PATH': '/bin', 'GLIBC_TUNABLES': 'glibc.malloc.hugetlb=1'}


def test_appends_to_the_users_own_tunables():
  env = host_tuning.tuned_environment({'GLIBC_TUNABLES': 'glibc.malloc.arena_max=2'}, glibc=(2, 36))
  assert env['GLIBC_TUNABLES'] == 'glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1'


@pytest.mark.parametrize('environ, glibc', [
    ({'GLIBC_TUNABLES': 'glibc.malloc.hugetlb=0'}, (2, 36)),  # the user's opt-out
    ({'GLIBC_TUNABLES': 'glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1'}, (2, 36)),  # re-executed
    ({}, (2, 34)),  # no glibc.malloc.hugetlb before 2.35
    ({}, None),  # not glibc (musl, macOS)
])
def test_nothing_to_change(environ, glibc):
  assert host_tuning.tuned_environment(environ, glibc) is None


@NEEDS_GLIBC_HUGETLB
def test_reexecutes_once_in_the_same_process_with_the_same_arguments():
  code = ('import os, sys; from launch import host_tuning; '
          'print(os.getpid(), os.environ.get("GLIBC_TUNABLES"), sys.argv[1:], flush=True); '
          'host_tuning.reexec_with_host_tuning(); print("after", os.getpid(), flush=True)')
  env = {k: v for k, v in os.environ.items() if k != 'GLIBC_TUNABLES'}
  out = subprocess.run([sys.executable, '-c', code, 'a', '--b=c'], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=60, check=True).stdout.split('\n')
  pid = out[0].split()[0]
  assert out[0] == f"{pid} None ['a', '--b=c']"  # the first run, then replaced by ...
  assert out[1] == f"{pid} glibc.malloc.hugetlb=1 ['a', '--b=c']"  # ... itself, tuned, once
  assert out[2] == f'after {pid}'


_FAULTS = """
import resource, jax, jax.numpy as jnp
x = jnp.ones((4096, 4096))  # 64 MiB: above glibc's mmap threshold
add = jax.jit(lambda x: x + 1.0)
add(x).block_until_ready()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
  add(x).block_until_ready()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // 4)
"""


@NEEDS_GLIBC_HUGETLB
@pytest.mark.skipif(_transparent_huge_pages() == 'never', reason='transparent huge pages are off')
def test_the_tunable_cuts_the_page_faults_of_a_large_xla_buffer():
  def faults(environ):
    env = dict(environ, JAX_PLATFORMS='cpu')
    result = subprocess.run([sys.executable, '-c', _FAULTS], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=120, check=True)
    return int(result.stdout.split()[-1])
  plain = {k: v for k, v in os.environ.items() if k != 'GLIBC_TUNABLES'}
  default, tuned = faults(plain), faults(host_tuning.tuned_environment(plain, GLIBC))
  assert default > 10_000  # 64 MiB of fresh 4 KiB pages for every output
  assert tuned < default / 10, (tuned, default)
