"""Building frozen config dataclasses from dicts or ConfigDicts, rejecting typos by name."""

import dataclasses
import math
from typing import Any, TypeVar

T = TypeVar('T')


def from_dict(cls: type[T], values: Any, what: str) -> T:
  """`cls(**values)` after checking every key is a field of `cls`.

  Args:
    cls: a dataclass type.
    values: a dict or an ml_collections ConfigDict.
    what: how error messages name the config (e.g. 'network').
  Raises:
    ValueError naming the unknown fields and listing the valid ones, or a NaN value.
  """
  values = dict(values.to_dict() if hasattr(values, 'to_dict') else values)
  reject_nan(values, what)
  known = {f.name for f in dataclasses.fields(cls)}
  unknown = sorted(set(values) - known)
  if unknown:
    raise ValueError(f'Unknown {what} config field(s) {unknown}; valid fields: {sorted(known)}.')
  return cls(**values)


def reject_nan(values: Any, where: str) -> None:
  """ValueError naming the first NaN in `values` (nested dicts and sequences included).

  Every comparison with NaN is false, so it slips through range checks written as
  `if x < 0: raise` (a NaN learning rate trained and exited 0; a NaN time limit never stopped).
  """
  items = values.items() if hasattr(values, 'items') else (
      enumerate(values) if isinstance(values, (list, tuple)) else ())
  for key, value in items:
    name = f'{where}[{key}]' if isinstance(key, int) else f'{where}.{key}'
    if isinstance(value, float) and math.isnan(value):
      raise ValueError(f'{name} must be a number, got nan.')
    reject_nan(value, name)
