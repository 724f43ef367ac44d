"""Checkpoints of the learner without pickle: msgpack arrays + JSON metadata.

Layout: `<directory>/ckpt_<step>/` (directory is usually `<workdir>/checkpoints`)
holds

- `state.msgpack`: {leaf path: array} of the state pytree, e.g. a TrainingState
  (params, opt_state, entropy_cost, steps), flattened with `jax.tree_util`
  key paths ('.params['core']['w']') and written with `flax.serialization`;
- `metadata.json`: step, wall time, counters (frames, episodes, ...), the
  experiment config, the network config, and the path/shape/dtype of every leaf.

Writes are atomic. On local disk everything goes into a hidden temp directory
that is fsynced and then renamed to `ckpt_<step>`, and old checkpoints are renamed
away before they are deleted. On a remote filesystem (`gs://`, `s3ta/utils/storage.py`),
which has no atomic rename, `metadata.json` is the commit marker: it is written after
`state.msgpack` and deleted first, and a directory without it is not a checkpoint. So a
crash at any point leaves only complete checkpoints (plus leftovers that nothing reads
and that are safe to delete). `restore` checks the network config and every leaf path,
shape and dtype against a template state before loading, so a checkpoint from
a different network fails with a message naming what differs.
"""

import dataclasses
import json
import os
import re
import shutil
import time
import uuid
from typing import Any, Callable, NamedTuple, Optional

import jax
import numpy as np
from flax import serialization

from s3ta.utils import storage

PREFIX = 'ckpt_'
STATE_FILE = 'state.msgpack'
METADATA_FILE = 'metadata.json'
FORMAT = 's3ta-checkpoint-v3'
# What changed in each format, for the message that refuses an older checkpoint.
FORMAT_CHANGES = {
    's3ta-checkpoint-v2': 'the optimizer state became optax\'s TF1 RMSProp chain',
    's3ta-checkpoint-v3': 'the hyperparameters moved into the optimizer state (optax.inject_hyperparams)',
}
_CKPT_RE = re.compile(re.escape(PREFIX) + r'(\d+)$')


class Checkpoint(NamedTuple):
  state: Any  # the template's pytree, leaves as numpy arrays (host memory)
  step: int
  counters: dict
  config: Any  # the experiment config as saved (JSON types), or None
  network_config: Optional[dict]
  path: str


def checkpoint_dir(workdir: str) -> str:
  """Where a run keeps its checkpoints: `<workdir>/checkpoints`."""
  return storage.join(workdir, 'checkpoints')


def to_json(value: Any, what: str = 'value') -> Any:
  """`value` as plain JSON types (dataclasses, ConfigDicts, numpy scalars, tuples -> lists)."""
  if dataclasses.is_dataclass(value) and not isinstance(value, type):
    value = dataclasses.asdict(value)
  elif hasattr(value, 'to_dict'):  # ml_collections.ConfigDict
    value = value.to_dict()

  def default(obj):
    if isinstance(obj, (np.generic, np.ndarray, jax.Array)):
      return np.asarray(obj).tolist()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
      return dataclasses.asdict(obj)
    if hasattr(obj, 'to_dict'):
      return obj.to_dict()
    raise TypeError(f'{type(obj).__name__} {obj!r}')

  try:
    return json.loads(json.dumps(value, default=default))
  except (TypeError, ValueError) as e:
    raise ValueError(f'{what} must be JSON-serialisable; cannot encode {e}.') from e


def _leaf_path_items(tree) -> tuple[list[tuple[str, Any]], Any]:
  leaves_with_path, treedef = jax.tree_util.tree_flatten_with_path(tree)
  return [(jax.tree_util.keystr(path), leaf) for path, leaf in leaves_with_path], treedef


def _shape_dtype(leaf) -> tuple[tuple[int, ...], str]:
  if hasattr(leaf, 'shape') and hasattr(leaf, 'dtype'):
    return tuple(leaf.shape), np.dtype(leaf.dtype).name
  array = np.asarray(leaf)
  return array.shape, array.dtype.name


def _fsync_dir(path: str) -> None:
  fd = os.open(path, os.O_RDONLY)
  try:
    os.fsync(fd)
  finally:
    os.close(fd)


def _remove_dir(directory: str, path: str) -> None:
  """Deletes checkpoint `path` so that a crash mid-delete never leaves a partial one that looks
  complete: locally it is renamed to a hidden name first; remotely its commit marker goes first."""
  if storage.is_remote(path):
    if storage.exists(storage.join(path, METADATA_FILE)):
      storage.remove(storage.join(path, METADATA_FILE))
    storage.rmtree(path)
    return
  trash = os.path.join(directory, f'.trash-{os.path.basename(path)}-{uuid.uuid4().hex}')
  os.rename(path, trash)
  shutil.rmtree(trash, ignore_errors=True)


def list_checkpoints(directory: str) -> list[tuple[int, str]]:
  """Complete checkpoints in `directory` as (step, path), oldest first."""
  if not storage.isdir(directory):
    return []
  found = []
  for name in storage.listdir(directory):
    match = _CKPT_RE.match(name)
    path = storage.join(directory, name)
    if match and all(storage.isfile(storage.join(path, f)) for f in (STATE_FILE, METADATA_FILE)):
      found.append((int(match.group(1)), path))
  return sorted(found)


def latest_checkpoint(directory: str) -> Optional[str]:
  """Path of the newest complete checkpoint in `directory`, or None if there is none."""
  checkpoints = list_checkpoints(directory)
  return checkpoints[-1][1] if checkpoints else None


def save(directory: str, step: int, state: Any, *, counters: Optional[dict] = None,
         config: Any = None, network_config: Any = None, keep: int = 3) -> str:
  """Writes `state` (a pytree of arrays) as `<directory>/ckpt_<step>` and keeps the newest `keep`.

  Args:
    directory: the checkpoints directory (created if missing), e.g. `checkpoint_dir(workdir)`.
    step: learner step the state belongs to (>= 0); names the checkpoint. Saving the
      same step again replaces that checkpoint.
    state: the pytree to save (TrainingState or any other tree of arrays).
    counters: JSON-serialisable counters (frames, episodes, ...) restored alongside.
    config: the experiment config (dataclass, ConfigDict or dict), stored for reference.
    network_config: the NetworkConfig (or its dict); `restore` compares against it.
    keep: number of newest checkpoints to keep (>= 1).
  Returns:
    the path of the new checkpoint.
  """
  step = int(step)
  if step < 0:
    raise ValueError(f'step must be >= 0, got {step}.')
  if keep < 1:
    raise ValueError(f'keep must be >= 1, got {keep}.')
  items, _ = _leaf_path_items(jax.device_get(state))
  arrays = {path: np.asarray(leaf) for path, leaf in items}
  metadata = {
      'format': FORMAT,
      'step': step,
      'time': time.time(),
      'counters': to_json(counters or {}, 'counters'),
      'config': to_json(config, 'config'),
      'network_config': to_json(network_config, 'network_config'),
      'leaves': {path: [list(a.shape), a.dtype.name] for path, a in arrays.items()},
  }
  storage.makedirs(directory)
  final = storage.join(directory, f'{PREFIX}{step}')
  state_bytes = serialization.msgpack_serialize(arrays)
  metadata_bytes = json.dumps(metadata, indent=1).encode()
  if storage.is_remote(directory):
    _commit_remote(directory, final, state_bytes, metadata_bytes)
  else:
    _commit_local(directory, final, state_bytes, metadata_bytes)
  for _, old in list_checkpoints(directory)[:-keep]:
    _remove_dir(directory, old)
  return final


def _commit_local(directory: str, final: str, state_bytes: bytes, metadata_bytes: bytes) -> None:
  """Writes into a hidden temp directory, fsyncs it and renames it to `final`."""
  tmp = os.path.join(directory, f'.tmp-{os.path.basename(final)}-{os.getpid()}-{uuid.uuid4().hex}')
  os.mkdir(tmp)
  try:
    storage.write_bytes(os.path.join(tmp, STATE_FILE), state_bytes)
    storage.write_bytes(os.path.join(tmp, METADATA_FILE), metadata_bytes)
    _fsync_dir(tmp)
    if os.path.exists(final):
      _remove_dir(directory, final)
    os.rename(tmp, final)
    _fsync_dir(directory)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise


def _commit_remote(directory: str, final: str, state_bytes: bytes, metadata_bytes: bytes) -> None:
  """Writes `final` in place, the state first and the metadata (the commit marker) last."""
  if storage.exists(final):
    _remove_dir(directory, final)
  storage.makedirs(final)
  storage.write_bytes(storage.join(final, STATE_FILE), state_bytes)
  storage.write_bytes(storage.join(final, METADATA_FILE), metadata_bytes)


# Network fields that change how a step is computed, not what the parameters are.
RUNTIME_ONLY_NETWORK_FIELDS = ('remat', 'scan_unroll')


def _differing_keys(saved: dict, wanted: dict) -> list[str]:
  """Fields of the network config that differ. A field the checkpoint lacks predates it
  (new fields default to the old behaviour), so it is not a difference; the leaf shape
  and dtype checks still catch parameters that do not fit."""
  keys = sorted(k for k in set(saved) | set(wanted)
                if k not in RUNTIME_ONLY_NETWORK_FIELDS and (k in saved or k not in wanted))
  return [k for k in keys if saved.get(k) != wanted.get(k)]


def _config_differences(saved: Optional[dict], wanted: dict) -> list[str]:
  if saved is None:
    return ['the checkpoint has no network config']
  return [f'{k}: checkpoint {saved.get(k, "<missing>")!r} vs requested {wanted.get(k, "<missing>")!r}'
          for k in _differing_keys(saved, wanted)]


def _first_leaf_mismatch(saved_leaves: dict, template_items) -> Optional[str]:
  template_paths = [path for path, _ in template_items]
  for path, leaf in template_items:
    if path not in saved_leaves:
      return f'leaf {path} of the template is not in the checkpoint'
    shape, dtype = _shape_dtype(leaf)
    saved_shape, saved_dtype = tuple(saved_leaves[path][0]), saved_leaves[path][1]
    if saved_shape != shape:
      return f'leaf {path}: checkpoint shape {saved_shape} != template shape {shape}'
    if saved_dtype != dtype:
      return f'leaf {path}: checkpoint dtype {saved_dtype} != template dtype {dtype}'
  extra = sorted(set(saved_leaves) - set(template_paths))
  if extra:
    return f'leaf {extra[0]} of the checkpoint is not in the template ({len(extra)} extra leaves)'
  return None


def _load_checked(path: str) -> tuple[str, dict, dict]:
  """(path, metadata, arrays) of the checkpoint at `path` (or the latest in it), checked.

  Raises ValueError (one sentence naming the checkpoint) when there is none, its format
  is not this version's, it does not decode (a truncated or garbled file), or its arrays
  disagree with its metadata.
  """
  if not storage.isfile(storage.join(path, METADATA_FILE)):
    latest = latest_checkpoint(path)
    if latest is None:
      raise ValueError(f'No checkpoint at {path!r}: neither a {PREFIX}<step> directory nor a '
                       'directory that contains one.')
    path = latest
  remedy = 'move it out of the checkpoints directory to resume from the one before it'
  try:
    metadata = json.loads(storage.read_bytes(storage.join(path, METADATA_FILE)))
    arrays = serialization.msgpack_restore(storage.read_bytes(storage.join(path, STATE_FILE)))
    leaves = metadata['leaves']
  except Exception as e:  # pylint: disable=broad-except  (msgpack raises several types)
    reason = (str(e).strip().splitlines() or [''])[0]
    raise ValueError(f'Checkpoint {path} is corrupt ({type(e).__name__}: {reason}); {remedy}.'
                     ) from e
  if metadata.get('format') != FORMAT:
    raise ValueError(f'{path} has checkpoint format {metadata.get("format")!r}; this version reads '
                     f'{FORMAT!r} only ({FORMAT_CHANGES[FORMAT]}). Train a new run, or read it '
                     'with the commit that wrote it.')
  for leaf_path, (shape, _) in leaves.items():
    if leaf_path not in arrays or list(np.shape(arrays[leaf_path])) != list(shape):
      found = np.shape(arrays[leaf_path]) if leaf_path in arrays else 'nothing'
      raise ValueError(f'Checkpoint {path} is corrupt: leaf {leaf_path} holds {found}, its '
                       f'metadata says {shape}; {remedy}.')
  return path, metadata, arrays


def checked_metadata(path: str) -> dict:
  """The metadata of the checkpoint at `path` (or the latest in it), once the whole checkpoint
  has been read and checked as a resume would (ValueError naming it otherwise)."""
  return _load_checked(path)[1]


def _network_problems(metadata: dict, network_config: Any) -> list:
  if network_config is None:
    return []
  saved = metadata.get('network_config')
  wanted = to_json(network_config, 'network_config')
  differences = _config_differences(saved, wanted)
  if not differences:
    return []
  flags = [f'--config.network.{k}={_flag_value(saved[k])}'
           for k in (_differing_keys(saved, wanted) if saved else []) if k in saved and k in wanted]
  remedy = f' (to resume it as saved: {" ".join(flags)})' if flags else ''
  return ['network config differs: ' + '; '.join(differences) + remedy]


def _flag_value(value: Any) -> str:
  """A saved config value as an ml_collections `--config.x=` flag writes it."""
  if isinstance(value, list):
    return repr(tuple(value))
  return str(value)


def _misfit(path: str, problems: list) -> ValueError:
  return ValueError(f'Checkpoint {path} does not fit the requested state: ' + '. '.join(problems)
                    + '.')


def check_restorable(directory: str, network_config: Any = None) -> Optional[str]:
  """The checkpoint a run would resume from (None if there is none yet), after `_load_checked`.

  Launchers call it before starting anything, so that a corrupt or foreign checkpoint is
  one error line (and nothing is overwritten) instead of a learner crash.
  """
  if latest_checkpoint(directory) is None:
    return None
  path, metadata, _ = _load_checked(directory)
  problems = _network_problems(metadata, network_config)
  if problems:
    raise _misfit(path, problems)
  return path


def restore(path: str, template: Any, *, network_config: Any = None) -> Checkpoint:
  """Loads a checkpoint into the structure of `template`, after checking it fits.

  Args:
    path: a `ckpt_<step>` directory, or a checkpoints directory (its latest is used).
    template: a pytree with the expected structure, shapes and dtypes (e.g. a freshly
      initialised TrainingState, or `jax.eval_shape` of one); its values are unused.
    network_config: if given, must equal the network config stored in the checkpoint.
  Returns:
    a `Checkpoint` whose `state` has the template's structure with numpy leaves.
  Raises:
    ValueError: no checkpoint at `path`; it is corrupt; the network configs differ
      (listing every differing field); or the first leaf whose path, shape or dtype differs.
  """
  path, metadata, arrays = _load_checked(path)
  items, treedef = _leaf_path_items(template)
  problems = _network_problems(metadata, network_config)
  mismatch = _first_leaf_mismatch(metadata['leaves'], items)
  if mismatch:
    problems.append(mismatch)
  if problems:
    raise _misfit(path, problems)
  leaves = [np.asarray(arrays[leaf_path]) for leaf_path, _ in items]
  return Checkpoint(state=jax.tree_util.tree_unflatten(treedef, leaves), step=metadata['step'],
                    counters=metadata['counters'], config=metadata['config'],
                    network_config=metadata['network_config'], path=path)


class Checkpointer:
  """Saves a run's checkpoints to `<workdir>/checkpoints` at most every `interval_s` seconds.

  Holds what does not change between saves (configs, keep) for the learner loop:
  call `maybe_save` after each update, `save` at the end, `restore_latest` at start-up.
  """

  def __init__(self, workdir: str, *, keep: int = 3, interval_s: float = 600.0,
               config: Any = None, network_config: Any = None,
               clock: Callable[[], float] = time.monotonic):
    if keep < 1:
      raise ValueError(f'keep must be >= 1, got {keep}.')
    if interval_s < 0:
      raise ValueError(f'interval_s must be >= 0, got {interval_s}.')
    self.directory = checkpoint_dir(workdir)
    self._keep, self._interval_s, self._clock = keep, interval_s, clock
    self._config, self._network_config = config, network_config
    self._last_save = clock()

  def save(self, step: int, state: Any, counters: Optional[dict] = None) -> str:
    path = save(self.directory, step, state, counters=counters, config=self._config,
                network_config=self._network_config, keep=self._keep)
    self._last_save = self._clock()
    return path

  def maybe_save(self, step: int, state: Any, counters: Optional[dict] = None) -> Optional[str]:
    """Saves if `interval_s` has passed since the last save (or construction)."""
    if self._clock() - self._last_save < self._interval_s:
      return None
    return self.save(step, state, counters)

  def restore_latest(self, template: Any) -> Optional[Checkpoint]:
    """The latest checkpoint restored into `template`, or None when there is none yet."""
    if latest_checkpoint(self.directory) is None:
      return None
    return restore(self.directory, template, network_config=self._network_config)
