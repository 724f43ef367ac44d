"""Test-wide settings: deterministic CPU JAX, quiet TensorFlow, one compilation cache per run.

The cache: most of a small training test's time is XLA compiling the same tiny networks
that other tests (and the launchers they start as subprocesses, which inherit the
environment) compile again. JAX's persistent compilation cache in a directory made for
this pytest run, and removed after it, compiles each program once per run. It holds
compiled programs only, so what runs is the same (`test_same_seed_same_run`, run alone,
compares a fresh compile with a cached one); the jit caches that tests count are in memory
and not affected. A `JAX_COMPILATION_CACHE_DIR` already set is used as it is (and kept).
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

import s3ta  # noqa: E402,F401  (imports rlax before anything pulls in TF)
