"""Building frozen config dataclasses from dicts or ConfigDicts, rejecting typos by name."""

import dataclasses
from typing import Any, TypeVar

T = TypeVar('T')


def from_dict(cls: type[T], values: Any, what: str) -> T:
  """`cls(**values)` after checking every key is a field of `cls`.

  Args:
    cls: a dataclass type.
    values: a dict or an ml_collections ConfigDict.
    what: how error messages name the config (e.g. 'network').
  Raises:
    ValueError naming the unknown fields and listing the valid ones.
  """
  values = dict(values.to_dict() if hasattr(values, 'to_dict') else values)
  known = {f.name for f in dataclasses.fields(cls)}
  unknown = sorted(set(values) - known)
  if unknown:
    raise ValueError(f'Unknown {what} config field(s) {unknown}; valid fields: {sorted(known)}.')
  return cls(**values)
