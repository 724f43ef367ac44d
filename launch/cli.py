"""The launchers' command-line checks: a bad flag, `--config.<key>` override or workdir is one line, exit 2.

absl reports a malformed flag value with a FATAL line and exit 1, and ml_collections
reports an unknown config key with an AttributeError traceback. `parse_flags` (given to
`absl.app.run` as `flags_parser`) turns both into one `error:` line that names the flag
or key and, for an unknown key, the closest valid keys at that level.
"""

import difflib
import os
import runpy
import signal
import symtable
import sys
import tempfile
import threading
import uuid
from typing import NoReturn, Optional, Sequence

from absl import flags

from s3ta.utils import checkpoint
from s3ta.utils import storage


SIGNAL_EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}


def stop_on_signals(stop: threading.Event) -> list:
  """Ctrl-C and SIGTERM set `stop`, so a run ends at its next check and saves.

  A KeyboardInterrupt raised wherever the main thread happens to be can land inside
  JAX's dispatch and leave a device buffer that never becomes ready (the run then
  hangs), so the first signal only asks the loops to stop. A second one raises
  KeyboardInterrupt at once (no final checkpoint). Returns the list the received
  signal numbers are appended to.
  """
  received = []

  def handler(signum, frame):
    del frame
    if received:
      raise KeyboardInterrupt
    received.append(signum)
    stop.set()

  for signum in SIGNAL_EXIT_CODES:
    signal.signal(signum, handler)
  return received


def exit_error(message: str) -> NoReturn:
  """Bad input: one `error:` line on stderr, exit status 2."""
  print(f'error: {message}', file=sys.stderr, flush=True)
  sys.exit(2)


def parse_flags(argv: Sequence[str]) -> list:
  """Parses `argv` into absl's FLAGS; on a bad flag prints one line and exits 2."""
  message = config_file_problem(argv)
  if message is None:
    try:
      return flags.FLAGS(list(argv))
    except (flags.Error, AttributeError, KeyError, TypeError, ValueError) as e:
      message = unknown_config_key(argv) or _first_line(e)
  exit_error(message)


def config_file_problem(argv: Sequence[str]) -> Optional[str]:
  """One sentence if `--config=PATH[:ARG]` names no file, or a file that binds no top-level
  `get_config` (ml_collections would report either later, as a traceback or naming a module
  rather than the file), else None. The file is parsed, not run."""
  spec = _flag_value(argv, 'config')
  if spec is None:
    return None
  path = spec.partition(':')[0]
  if not os.path.isfile(path):
    folder = os.path.dirname(path) or '.'
    choices = sorted(name for name in os.listdir(folder) if name.endswith('.py')
                     and not name.startswith('_')) if os.path.isdir(folder) else []
    listing = f'; {folder}/ holds {", ".join(choices)}' if choices else ''
    return f'--config file {path!r} does not exist{listing}.'
  try:
    with open(path, 'rb') as f:
      module = symtable.symtable(f.read().decode(), path, 'exec')
  except (OSError, SyntaxError, ValueError):
    return None  # absl's parser reports an unreadable or invalid file itself
  # The module's own scope (if/try blocks included; functions and classes are scopes of their
  # own): a get_config that is defined, imported or assigned there is accepted.
  bound = 'get_config' in module.get_identifiers() and module.lookup('get_config')
  if not (bound and (bound.is_assigned() or bound.is_imported())):
    return f'--config file {path!r} defines no get_config(); see experiments/ for examples.'
  return None


def unknown_config_key(argv: Sequence[str]) -> Optional[str]:
  """'unknown config key ...' for the first `--config.<key>` override the config lacks, else None."""
  spec = _flag_value(argv, 'config')
  if spec is None:
    return None
  path, _, arg = spec.partition(':')
  try:
    get_config = runpy.run_path(path)['get_config']
    config = get_config(arg) if arg else get_config()
  except Exception:  # pylint: disable=broad-except  (the parser reports a bad config file itself)
    return None
  for item in argv:
    if not item.startswith('--config.'):
      continue
    key = item[len('--config.'):].split('=', 1)[0]
    node, walked = config, 'config'
    for part in key.split('.'):
      keys = list(node.keys()) if hasattr(node, 'keys') else []
      if part not in keys:
        close = difflib.get_close_matches(part, keys, n=3)
        hint = f' (did you mean {", ".join(f"{walked}.{k}" for k in close)}?)' if close else ''
        return (f'unknown config key {walked}.{part}{hint}; valid keys of {walked}: '
                f'{", ".join(sorted(keys))}.')
      node, walked = node[part], f'{walked}.{part}'
  return None


def _flag_value(argv: Sequence[str], name: str) -> Optional[str]:
  for i, item in enumerate(argv):
    if item.startswith(f'--{name}='):
      return item.split('=', 1)[1]
    if item == f'--{name}' and i + 1 < len(argv):
      return argv[i + 1]
  return None


def _first_line(error: Exception) -> str:
  text = str(error).strip() or type(error).__name__
  if len(text) > 1 and text[0] == text[-1] and text[0] in '"\'':  # KeyError-style quoting
    text = text[1:-1]
  lines = [line for line in text.splitlines() if line.strip()]
  if 'Traceback (most recent call last):' in text:  # a config file's get_config raised
    cause = lines[-1].split(': ', 1)[-1]  # 'ValueError: message' -> 'message'
    return f'{lines[0].partition(" Error whilst parsing")[0]} {cause}'
  return lines[0]


def require_local_workdir(workdir: str, launcher: str) -> None:
  """Local launches read their workdir while they run (progress, summary, node logs): a remote
  path is refused with one sentence naming the alternatives."""
  if storage.is_remote(workdir):
    raise ValueError(f'{launcher} runs on this machine and needs a local --workdir, got '
                     f'{workdir!r}; copy the workdir to remote storage afterwards, or launch a '
                     'cluster run (launch.train --launch_type=vertex_ai) to write there directly.')


def check_workdir(workdir: str, network_config) -> None:
  """Before a launch: `workdir` is creatable and writable, and its latest checkpoint (if any)
  decodes and was written for `network_config`. Raises ValueError (one sentence) otherwise,
  having changed nothing but creating the directory."""
  check_writable(workdir)
  checkpoint.check_restorable(checkpoint.checkpoint_dir(workdir), network_config)


def check_writable(workdir: str) -> None:
  """`workdir` is created if missing and accepts a file; ValueError (one sentence) otherwise."""
  try:
    if storage.is_remote(workdir):
      probe = storage.join(workdir, f'.write-test-{uuid.uuid4().hex}')
      storage.makedirs(workdir)
      storage.write_bytes(probe, b'')
      storage.remove(probe)
    else:
      os.makedirs(workdir, exist_ok=True)
      with tempfile.NamedTemporaryFile(dir=workdir, prefix='.write-test-'):
        pass
  except Exception as e:  # pylint: disable=broad-except  (OSError; tf.errors.* for remote paths)
    reason = getattr(e, 'strerror', None) or getattr(e, 'message', None) or e
    raise ValueError(f'workdir {workdir!r} is not a writable directory ({reason}).') from e
