"""The learner benchmark's full FLOP count (`benchmarks/learner.py --count_flops`)."""

import pytest

from benchmarks import learner as learner_benchmark
from s3ta.learning import LearnerConfig
from s3ta.networks import make_network
from tests.test_networks import SMALL

pytestmark = pytest.mark.core  # pure JAX: also run on the newer stack (scripts/check_next_stack.sh)

SHAPE, ACTIONS = (6, 5, 3), 3


def xla_flops(settings, unroll_length, batch_size):
  return learner_benchmark.traced_flops(make_network(settings, ACTIONS, SHAPE), LearnerConfig(),
                                        unroll_length, batch_size)


@pytest.mark.parametrize('kind', ['s3ta', 'resnet_lstm'])
def test_full_count_matches_the_unrolled_step_and_exceeds_the_looped_count(kind):
  """Extrapolated from T, B in {1, 2} to T 5, B 3, the count is XLA's for the same step with
  no loop left (`scan_unroll` = T + 1); XLA's count of the looped step has one core step of six."""
  settings = dict(SMALL, kind=kind)
  full = learner_benchmark.full_flop_count(settings, LearnerConfig(), ACTIONS, SHAPE,
                                           unroll_length=5, batch_size=3)['model_flops_per_step']
  unrolled = xla_flops(dict(settings, scan_unroll=6), 5, 3)
  looped = xla_flops(settings, 5, 3)
  assert full == pytest.approx(unrolled, rel=1e-4)  # V-trace's own loop: a few FLOPs a step
  assert full > looped * 1.05  # the core's other five steps are real work
  # remat is left out of the count (model FLOPs): the same figure with it on.
  assert learner_benchmark.full_flop_count(dict(settings, remat=True), LearnerConfig(), ACTIONS,
                                           SHAPE, 5, 3)['model_flops_per_step'] == full


def test_looped_count_is_bilinear_too():
  """The core's share rests on the looped count's coefficients: they predict T 5 x B 3."""
  settings = dict(SMALL, kind='s3ta')
  c0, c_t, c_b, c_tb = learner_benchmark.flops_coefficients(settings, LearnerConfig(), ACTIONS,
                                                            SHAPE, unrolled=False)
  assert c0 + 5 * c_t + 3 * c_b + 15 * c_tb == pytest.approx(xla_flops(settings, 5, 3), rel=1e-4)


def test_core_share_follows_the_core_size():
  """S3TA's core holds a large share, the ResNet-LSTM's LSTM a smaller one, and a wider
  core LSTM (the torso unchanged) raises the share."""
  def share(**settings):
    return learner_benchmark.full_flop_count(dict(SMALL, **settings), LearnerConfig(), ACTIONS,
                                             SHAPE, 6, 2)['model_flops_core_share']
  s3ta, wide, resnet = share(kind='s3ta'), share(kind='s3ta', lstm_size=64), share(kind='resnet_lstm')
  assert 0.3 < s3ta < wide < 1
  assert 0 < resnet < s3ta
