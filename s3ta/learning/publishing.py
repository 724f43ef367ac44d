"""Parameter publishing for the distributed learner: what `get_params` answers.

Actors, evaluators and inference nodes ask for parameters over courier, in courier's
threads. The host copy of one version is made once, on the first request for it, and
shared by every caller after; the training loop never waits for it. A caller that
already has the current version gets no parameters back (nothing is resent).
"""

import threading
from typing import Any, Optional

import jax


class ParamsPublisher:
  """One host (NumPy) copy of the parameters per version, made on demand."""

  def __init__(self):
    self._lock = threading.Lock()
    self._version: Optional[int] = None
    self._params: Any = None

  def get(self, version: int, device_params: Any, known_version: int = -1) -> dict:
    """{'version', 'params'} for the caller; `params` is None if it knows `version` already.

    Args:
      version: the version of `device_params` (the learner's parameter version).
      device_params: the learner's current parameters (on its device).
      known_version: the version the caller has (-1: none).
    """
    if version == known_version:
      return {'version': version, 'params': None}
    with self._lock:
      if self._version != version:
        self._version, self._params = version, jax.device_get(device_params)
      return {'version': self._version, 'params': self._params}
