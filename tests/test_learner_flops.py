"""The learner benchmark's full FLOP count (`benchmarks/learner.py --count_flops`)."""

import jax
import pytest

from benchmarks import learner as learner_benchmark
from s3ta.learning import LearnerConfig, init_training_state, make_sgd_step
from s3ta.networks import make_network

pytestmark = pytest.mark.core  # pure JAX: also run on the newer stack (scripts/check_next_stack.sh)

SMALL = dict(conv_channels=(8,), conv_kernels=(3,), conv_strides=(1,), vision_lstm_channels=16,
             key_channels=4, num_heads=2, basis_frequencies=1, query_hidden=(16,),
             answer_hidden=(32,), lstm_size=16, head_hidden=16, resnet_channels=(8,),
             resnet_blocks=1, resnet_hidden=16)
SHAPE, ACTIONS = (6, 5, 3), 3


def xla_flops(settings, unroll_length, batch_size):
  """XLA's own count for the traced sgd_step (a while loop's body once)."""
  network = make_network(settings, ACTIONS, SHAPE)
  config = LearnerConfig()
  state = jax.eval_shape(lambda: init_training_state(network, config, jax.random.PRNGKey(0)))
  batch = jax.eval_shape(
      lambda: learner_benchmark.synthetic_batch(network, unroll_length, batch_size))
  cost = jax.jit(make_sgd_step(network, config, jit=False)).lower(state, batch).cost_analysis()
  return float((cost[0] if isinstance(cost, (list, tuple)) else cost)['flops'])


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
