"""Test-wide settings: deterministic CPU JAX, quiet TensorFlow, one compilation cache per run,
and how the tests are split over pytest-xdist's workers (pytest.ini: `-n 2 --dist loadgroup`).

The cache: most of a small training test's time is XLA compiling the same tiny networks
that other tests (and the launchers they start as subprocesses, which inherit the
environment) compile again. JAX's persistent compilation cache in a directory made for
this pytest run, and removed after it, compiles each program once per run. It holds
compiled programs only, so what runs is the same (`test_same_seed_same_run`, run alone,
compares a fresh compile with a cached one); the jit caches that tests count are in memory
and not affected. A `JAX_COMPILATION_CACHE_DIR` already set is used as it is (and kept). The
workers start from pytest's own process after this file has set it, so they share the cache.
JAX writes an entry in place, so a process may read one that another is still writing: JAX
then warns "Error reading persistent compilation cache entry ... truncated stream" and
compiles the program itself (a partial entry never decompresses). Rare and harmless.

The workers: each test file is one unit of work, so a module-scoped fixture runs once. The
files that launch whole programs or train to a threshold (PROGRAM_FILES) are one unit
together, handed out first and run one test at a time, on one worker: their tests time how fast a
program stops, and two of them side by side would each get one core. Other workers take
the other files meanwhile. `-n 0` runs everything in this process, as before.
"""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault('JAX_PLATFORMS', 'cpu')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
if 'JAX_COMPILATION_CACHE_DIR' not in os.environ:
  _cache_dir = tempfile.mkdtemp(prefix='s3ta-test-jax-cache-')
  atexit.register(shutil.rmtree, _cache_dir, ignore_errors=True)
  os.environ['JAX_COMPILATION_CACHE_DIR'] = _cache_dir
  # Every program, however quick to compile: the tests' networks are small.
  os.environ['JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS'] = '0'
  os.environ['JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES'] = '0'

import pytest  # noqa: E402

import s3ta  # noqa: E402,F401  (imports rlax before anything pulls in TF)

PROGRAM_FILES = ('test_learning.py', 'test_distributed.py', 'test_pbt_distributed.py',
                 'test_evolve_launch.py')
PROGRAMS = 'programs'  # their xdist group


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
  if not config.pluginmanager.hasplugin('xdist'):
    return
  for item in items:
    name = item.path.name
    item.add_marker(pytest.mark.xdist_group(PROGRAMS if name in PROGRAM_FILES else name))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
  """xdist's group scheduler, but the programs' group is handed out first.

  xdist hands out units in order of their number of tests; the programs' few tests
  take about half of the suite's time, so handed out last they would end it alone.
  """
  from xdist.scheduler import LoadGroupScheduling  # pylint: disable=g-import-not-at-top

  class ProgramsFirst(LoadGroupScheduling):

    def _assign_work_unit(self, node):
      if PROGRAMS in self.workqueue:
        self.workqueue.move_to_end(PROGRAMS, last=False)
      super()._assign_work_unit(node)

  return ProgramsFirst(config, log)
