"""A run's files on local disk or on a remote filesystem (`gs://...`), behind one set of calls.

A path with a scheme (`gs://bucket/run`, `s3://...`, `ram://...`) is remote and goes
through TensorFlow's `tf.io.gfile`, which reads and writes every filesystem TF has
(Cloud Storage among them); any other path is local and goes through `os`. Remote
filesystems have no atomic rename, so writers that need atomicity ask `is_remote`
and commit by writing a marker file last (`s3ta/utils/checkpoint.py`).
"""

import os
import shutil
from typing import IO

_SCHEME = '://'


def is_remote(path: str) -> bool:
  """Whether `path` names a remote filesystem (it has a scheme such as `gs://`)."""
  return _SCHEME in str(path)


def absolute(path: str) -> str:
  """`path` made absolute if local (relative paths would change meaning in other processes)."""
  return str(path) if is_remote(path) else os.path.abspath(path)


def join(path: str, *parts: str) -> str:
  if is_remote(path):
    return '/'.join([str(path).rstrip('/')] + [p.strip('/') for p in parts])
  return os.path.join(path, *parts)


def basename(path: str) -> str:
  return str(path).rstrip('/').rsplit('/', 1)[-1] if is_remote(path) else os.path.basename(path)


def _gfile():
  # Imported only for remote paths, so local runs and the pure-JAX core never load TF.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.io.gfile


def exists(path: str) -> bool:
  return _gfile().exists(path) if is_remote(path) else os.path.exists(path)


def isdir(path: str) -> bool:
  return _gfile().isdir(path) if is_remote(path) else os.path.isdir(path)


def isfile(path: str) -> bool:
  if is_remote(path):
    return _gfile().exists(path) and not _gfile().isdir(path)
  return os.path.isfile(path)


def listdir(path: str) -> list[str]:
  """Entry names of directory `path` (without trailing slashes)."""
  if is_remote(path):
    return [name.rstrip('/') for name in _gfile().listdir(path)]
  return os.listdir(path)


def makedirs(path: str) -> None:
  if is_remote(path):
    _gfile().makedirs(path)
  else:
    os.makedirs(path, exist_ok=True)


def remove(path: str) -> None:
  if is_remote(path):
    _gfile().remove(path)
  else:
    os.remove(path)


def rmtree(path: str) -> None:
  """Deletes directory `path` and everything in it; a missing `path` is not an error."""
  if is_remote(path):
    if _gfile().exists(path):
      _gfile().rmtree(path)
  else:
    shutil.rmtree(path, ignore_errors=True)


def open_file(path: str, mode: str = 'r', encoding: str = 'utf-8') -> IO:
  """`open(path, mode)`; on a remote filesystem a `tf.io.gfile.GFile` (append works there too:
  on object stores each flush rewrites the object, so append rarely: metrics, not logs)."""
  if is_remote(path):
    return _gfile().GFile(path, mode)
  return open(path, mode, encoding=None if 'b' in mode else encoding)


def write_bytes(path: str, data: bytes) -> None:
  """Writes `data` to `path`, durably: a local file is fsynced; a remote object exists only
  once its upload completed."""
  if is_remote(path):
    with _gfile().GFile(path, 'wb') as f:
      f.write(data)
    return
  with open(path, 'wb') as f:
    f.write(data)
    f.flush()
    os.fsync(f.fileno())


def read_bytes(path: str) -> bytes:
  with open_file(path, 'rb') as f:
    return f.read()
