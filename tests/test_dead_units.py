"""benchmarks/dead_units.py's layer statistics on a T-maze attention agent with known weights."""

import types

import jax
import numpy as np
import pytest

from benchmarks import dead_units
from s3ta.networks import make_network


@pytest.mark.parametrize('token_bias', [0.0, -100.0])
def test_relu_tokens_pushed_below_zero_read_dead_and_constant(token_bias):
  network = make_network({'kind': 'time_attention', 'time_hidden': 0, 'time_activation': 'relu'},
                         5, (5, 5, 3 * 4))
  params = network.init(jax.random.PRNGKey(0))
  params['torso']['output']['bias'] = np.full_like(params['torso']['output']['bias'], token_bias)
  frames = np.random.default_rng(3).integers(0, 2, (16, 5, 5, 12)).astype(np.uint8) * 255
  rows = dead_units.layer_activity(types.SimpleNamespace(network=network, params=params), frames)
  layers = {name: stats for name, *stats in rows}
  shape, ever, pairs, saturated, varying = layers['torso/__call__/0/0']  # relu(tokens), flattened
  assert shape == (16, 4 * 32)
  if token_bias:  # every unit below zero on every view: dead, constant, nothing varies
    assert (ever, pairs, varying) == (0.0, 0.0, 0.0)
    assert layers['torso/output/__call__/0'][3] == 1.0  # every pre-activation |x| > 2.65
  else:
    assert 0.0 < pairs < ever <= 1.0 and 0.0 < varying < 1.0
