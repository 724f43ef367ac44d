"""s3ta: soft, spatial, sequential, top-down attention agents trained with IMPALA.

Importing the package first imports rlax in the way that works alongside the pinned
TensorFlow (see s3ta/utils/rlax_import.py), so users never meet TFP's import error.
"""

from s3ta.utils import rlax_import as _rlax_import  # noqa: F401  (must stay first)
