"""The learner benchmark's full FLOP count (`benchmarks/learner.py --count_flops`)."""

import pytest

from benchmarks import learner as learner_benchmark
from s3ta.learning import LearnerConfig
from s3ta.networks import make_network

pytestmark = pytest.mark.core  # pure JAX: also run on the newer stack (scripts/check_next_stack.sh)

SMALL = dict(conv_channels=(8,), conv_kernels=(3,), conv_strides=(1,), vision_lstm_channels=16,
             key_channels=4, num_heads=2, basis_frequencies=1, query_hidden=(16,),
             answer_hidden=(32,), lstm_size=16, head_hidden=16, resnet_channels=(8,),
             resnet_blocks=1, resnet_hidden=16)
SHAPE, ACTIONS = (6, 5, 3), 3


def xla_flops(settings, unroll_length, batch_size):
  return learner_benchmark.traced_flops(make_network(settings, ACTIONS, SHAPE), LearnerConfig(),
                                        unroll_length, batch_size)


@pytest.mark.parametrize('kind', ['s3ta', 'resnet_lstm'])
def test_full_count_matches_the_unrolled_step_and_exceeds_the_looped_count(kind):
  """Extrapolated from T, B in {1, 2} to T 5, B 3, the count is XLA's for the same step with
  no loop left (`scan_unroll` = T + 1); XLA's count of the looped step has one core step of six."""
  settings = dict(SMALL, kind=kind)
  full = learner_benchmark.model_flops_per_step(settings, LearnerConfig(), ACTIONS, SHAPE,
                                                unroll_length=5, batch_size=3)
  unrolled = xla_flops(dict(settings, scan_unroll=6), 5, 3)
  looped = xla_flops(settings, 5, 3)
  assert full == pytest.approx(unrolled, rel=1e-4)  # V-trace's own loop: a few FLOPs a step
  assert full > looped * 1.05  # the core's other five steps are real work
  # remat is left out of the count (model FLOPs): the same figure with it on.
  assert learner_benchmark.model_flops_per_step(dict(settings, remat=True), LearnerConfig(), ACTIONS,
                                                SHAPE, unroll_length=5, batch_size=3) == full


def test_core_share_gives_one_core_step_the_same_flops_at_any_unroll_length():
  """A core step's FLOPs do not depend on T: the share times the count over T + 1 steps agrees
  at T 3 and T 6; S3TA's core holds a large share, the ResNet-LSTM's LSTM a smaller one."""
  per_core_step, shares = {}, {}
  for kind in ('s3ta', 'resnet_lstm'):
    for t in (3, 6):
      settings = dict(SMALL, kind=kind)
      full = learner_benchmark.model_flops_per_step(settings, LearnerConfig(), ACTIONS, SHAPE, t, 2)
      share = learner_benchmark.core_flops_share(settings, LearnerConfig(), ACTIONS, SHAPE, t, 2, full)
      shares[kind, t], per_core_step[kind, t] = share, share * full / (t + 1)
    assert per_core_step[kind, 3] == pytest.approx(per_core_step[kind, 6], rel=1e-3)  # V-trace's loop
  assert 0.3 < shares['s3ta', 6] < 1
  assert 0 < shares['resnet_lstm', 6] < shares['s3ta', 6]
