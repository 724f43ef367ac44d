"""The one place that imports rlax, so it works whether or not TF is loaded already.

rlax -> distrax -> tensorflow_probability. TFP 0.25 checks the TF version (>= 2.18)
as soon as it sees `tensorflow` in `sys.modules`, and our pinned TF is 2.8 (for
Launchpad/Reverb). The JAX substrate that distrax uses never touches TF, so we hide
TF from `sys.modules` for the duration of the import and restore it afterwards.
This holds inside Launchpad nodes too, where TF is always imported first.

Where rlax does not import at all (newer JAX, where TFP or distrax break), `rlax`
here is `s3ta.learning.rlax_standin`, pure-JAX versions of the four rlax functions
the loss uses, with rlax 0.1.7's semantics, and `USING_STANDIN` is True;
one warning line says so and why. Use `rlax_import.rlax` at call time rather than
binding it at import time inside `s3ta.learning`: loading the stand-in imports
`s3ta.learning`, whose modules would otherwise see this module half-initialised.
"""

import logging
import sys

_tensorflow = sys.modules.pop('tensorflow', None)
try:
  import rlax  # pylint: disable=g-import-not-at-top
  USING_STANDIN = False
  STANDIN_REASON = None
except Exception as e:  # pylint: disable=broad-except  (TFP/distrax fail in many ways)
  USING_STANDIN = True
  _first_line = next(iter(str(e).strip().splitlines()), '')
  STANDIN_REASON = f'{type(e).__name__}: {_first_line}' if _first_line else type(e).__name__
  del _first_line
finally:
  if _tensorflow is not None:
    sys.modules['tensorflow'] = _tensorflow
del _tensorflow

if USING_STANDIN:
  from s3ta.learning import rlax_standin as rlax  # pylint: disable=g-import-not-at-top
  logging.getLogger('s3ta').warning(
      'rlax could not be imported (%s); using s3ta.learning.rlax_standin, pure-JAX stand-ins '
      'tested equal to rlax 0.1.7.', STANDIN_REASON)
