"""A small S3TA agent learns Catch in the single-process loop (fixed seeds)."""

import pytest

from experiments import catch
from s3ta.train_local import train


@pytest.mark.learning
def test_small_s3ta_learns_catch():
  config = catch.get_config('s3ta')
  lines = []
  result = train(config, log=lines.append, stop_return=0.95)
  print('\n'.join(lines))
  # The early stop looks at the training return; the assertion is on fresh episodes.
  assert result.final_eval_return is not None
  assert result.final_eval_return >= 0.9, '\n'.join(lines)
  assert result.env_steps <= config.max_env_steps
