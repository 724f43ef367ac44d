"""Files the PBT controller keeps in the workdir: state (JSON) and logs (JSONL)."""

import json
import math
import os
import tempfile
from typing import Any, Iterator

STATE_FILE = 'pbt_state.json'  # controller state: population, lineage, counters, rng
EVENTS_FILE = 'pbt_events.jsonl'  # one line per exploit / explore event
FITNESS_FILE = 'pbt_fitness.jsonl'  # one line per member per poll (for plots)


def _clean(value: Any) -> Any:
  """JSON has no NaN/inf: map them to None, numpy scalars to Python ones."""
  if isinstance(value, dict):
    return {str(k): _clean(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_clean(v) for v in value]
  if hasattr(value, 'item') and not isinstance(value, (str, bytes)):
    value = value.item()
  if isinstance(value, float) and not math.isfinite(value):
    return None
  return value


def write_json_atomic(path: str, value: Any) -> None:
  """Writes `value` to `path` so that a reader sees the old or the new file, never half."""
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(prefix='.' + os.path.basename(path) + '.', dir=directory)
  try:
    with os.fdopen(fd, 'w') as f:
      json.dump(_clean(value), f, indent=1, sort_keys=True)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.unlink(tmp)
    raise


def read_json(path: str) -> Any:
  with open(path) as f:
    return json.load(f)


def append_jsonl(path: str, value: Any) -> None:
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, 'a') as f:
    f.write(json.dumps(_clean(value), sort_keys=True) + '\n')
    f.flush()


def read_jsonl(path: str) -> Iterator[dict]:
  """Yields the complete lines of a JSONL file (a torn last line is skipped)."""
  if not os.path.exists(path):
    return
  with open(path) as f:
    for line in f:
      line = line.strip()
      if not line:
        continue
      try:
        yield json.loads(line)
      except json.JSONDecodeError:
        continue
