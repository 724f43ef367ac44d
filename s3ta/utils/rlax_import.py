"""The one place that imports rlax, so it works whether or not TF is loaded already.

rlax -> distrax -> tensorflow_probability. TFP 0.25 checks the TF version (>= 2.18)
as soon as it sees `tensorflow` in `sys.modules`, and our pinned TF is 2.8 (for
Launchpad/Reverb). The JAX substrate that distrax uses never touches TF, so we hide
TF from `sys.modules` for the duration of the import and restore it afterwards.
This holds inside Launchpad nodes too, where TF is always imported first.
"""

import sys

_tensorflow = sys.modules.pop('tensorflow', None)
try:
  import rlax  # pylint: disable=g-import-not-at-top,unused-import
finally:
  if _tensorflow is not None:
    sys.modules['tensorflow'] = _tensorflow
del _tensorflow
