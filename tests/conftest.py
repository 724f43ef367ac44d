"""Test-wide settings: deterministic CPU JAX and quiet TensorFlow."""

import os

os.environ.setdefault('JAX_PLATFORMS', 'cpu')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import s3ta  # noqa: E402,F401  (imports rlax before anything pulls in TF)
