"""Learner progress shared by both trainers: monotone counters, window statistics, the stop rule.

Pure Python (no JAX, TF or Reverb), so the distributed learner, the single-machine
trainer and the launcher's summary all read the same names.
"""

import dataclasses
from typing import Optional

STOP_REASONS = ('max_frames', 'max_learner_steps', 'max_seconds', 'stop requested', 'non-finite')


class Counters:
  """Monotone learner counters; saved in checkpoints and restored on resume."""

  FIELDS = ('learner_steps', 'learner_frames', 'param_version', 'items_consumed', 'train_seconds')

  def __init__(self, **values):
    for name in self.FIELDS:
      setattr(self, name, values.get(name, 0))

  @classmethod
  def from_checkpoint(cls, values: dict) -> 'Counters':
    """Counters from a checkpoint's saved dict (unknown keys, e.g. newer fields, ignored)."""
    return cls(**{k: v for k, v in values.items() if k in cls.FIELDS})

  def as_dict(self) -> dict:
    return {name: getattr(self, name) for name in self.FIELDS}


class StepStats:
  """Statistics of one logging window: policy lag, and seconds waiting for data and in sgd."""

  def __init__(self):
    self.reset()

  def reset(self) -> None:
    self.lag_sum, self.lag_max, self.lag_n = 0.0, 0, 0
    self.wait_s = self.sgd_s = 0.0

  def add_lag(self, mean_lag: float, max_lag: int) -> None:
    """One sgd step whose batch was acted `mean_lag` (at most `max_lag`) versions ago."""
    self.lag_sum += float(mean_lag)
    self.lag_max = max(self.lag_max, int(max_lag))
    self.lag_n += 1

  def record(self) -> dict:
    """The window's fields for a metrics record (lags are None before any step)."""
    return dict(policy_lag=self.lag_sum / self.lag_n if self.lag_n else None,
                policy_lag_max=self.lag_max if self.lag_n else None,
                wait_s=self.wait_s, sgd_s=self.sgd_s)


@dataclasses.dataclass(frozen=True)
class StopRule:
  """When a run ends: the first limit reached (0 = no limit)."""
  max_frames: int = 0
  max_steps: int = 0
  max_seconds: float = 0.0
  max_nonfinite_in_a_row: int = 0

  def reason(self, counters: Counters, seconds: float, nonfinite_in_a_row: int = 0) -> Optional[str]:
    """The STOP_REASONS entry of the limit reached after `seconds` of this run, else None.

    `nonfinite_in_a_row`: the sgd steps just taken whose update was not finite (skipped).
    """
    if self.max_nonfinite_in_a_row and nonfinite_in_a_row >= self.max_nonfinite_in_a_row:
      return 'non-finite'
    if self.max_frames and counters.learner_frames >= self.max_frames:
      return 'max_frames'
    if self.max_steps and counters.learner_steps >= self.max_steps:
      return 'max_learner_steps'
    if self.max_seconds and seconds >= self.max_seconds:
      return 'max_seconds'
    return None


def nonfinite_halt_message(counters: Counters, in_a_row: int, checkpoint: Optional[str]) -> str:
  """The one line a learner prints when it halts on non-finite updates."""
  return (f'halted: {in_a_row} sgd steps in a row had a non-finite loss or gradient (the last at '
          f'learner step {counters.learner_steps}); each was skipped, so the parameters are those '
          f'of the last finite step. Last good checkpoint: {checkpoint or "none"}.')
