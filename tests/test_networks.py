"""Network shapes at the paper's sizes, ablation properties and recurrent-state handling."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from s3ta.networks import AgentInput, NetworkConfig, make_network, parameter_count
from s3ta.networks import agent as agent_lib
from s3ta.networks import attention as attention_lib

pytestmark = pytest.mark.core  # pure-JAX core only: also run on current JAX

SMALL = dict(conv_channels=(8,), conv_kernels=(3,), conv_strides=(1,), vision_lstm_channels=16,
             key_channels=4, num_heads=2, basis_frequencies=1, query_hidden=(16,),
             answer_hidden=(32,), lstm_size=16, head_hidden=16, resnet_channels=(8,),
             resnet_blocks=1, resnet_hidden=16)


def small_network(kind='s3ta', num_actions=3, shape=(6, 5, 3)):
  return make_network(dict(SMALL, kind=kind), num_actions, shape)


def random_inputs(network, time, batch, seed=0, first=False):
  rng = np.random.default_rng(seed)
  return AgentInput(
      observation=rng.integers(0, 256, (time, batch) + network.observation_shape).astype(np.uint8),
      prev_action=rng.integers(0, network.num_actions, (time, batch)).astype(np.int32),
      prev_reward=rng.normal(size=(time, batch)).astype(np.float32),
      is_first=np.full((time, batch), first))


def random_state(network, batch, seed):
  leaves, tree = jax.tree_util.tree_flatten(network.initial_state(batch))
  keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
  return jax.tree_util.tree_unflatten(tree, [jax.random.normal(k, l.shape) for k, l in zip(keys, leaves)])


def test_paper_size_shapes_and_parameter_count():
  network = make_network(NetworkConfig(), 18, (210, 160, 3))
  params = jax.eval_shape(network.init, jax.random.PRNGKey(0))
  state = network.initial_state(2)
  # Vision core output O: 27 x 20 x 128 (the ConvLSTM state).
  assert state.vision[1].shape == (2, 27, 20, 128)
  outputs, final = jax.eval_shape(network.unroll, params, network.dummy_input(3, 2), state)
  assert outputs.logits.shape == (3, 2, 18)
  assert outputs.value.shape == (3, 2)
  assert outputs.attention.shape == (3, 2, 4, 27, 20)
  assert outputs.queries.shape == (3, 2, 4, 72)  # 4 heads x (8 key + 64 basis)
  # Answer processor input: 4 answers x 184 (120 values + 64 basis) + 4 queries x 72
  # + 18 one-hot previous action + 1 previous reward.
  assert params['core']['answer_0']['kernel'].shape == (4 * 184 + 4 * 72 + 18 + 1, 512)
  assert params['core']['query_out']['kernel'].shape == (128, 4 * 72)
  assert params['core']['policy_lstm']['hi']['kernel'].shape == (256, 256)
  assert params['core']['head']['hidden']['kernel'].shape == (256, 128)
  assert params['torso']['conv_0']['kernel'].shape == (8, 8, 3, 32)
  assert params['torso']['conv_1']['kernel'].shape == (4, 4, 32, 64)
  assert 2.2e6 < parameter_count(params) < 2.4e6
  assert jax.tree_util.tree_map(lambda x: x.shape, final) == jax.tree_util.tree_map(lambda x: x.shape, state)


@pytest.mark.parametrize('kind', ['resnet', 'resnet_lstm'])
def test_resnet_baselines_have_no_attention(kind):
  network = make_network(NetworkConfig(kind=kind), 6, (84, 84, 1))
  params = jax.eval_shape(network.init, jax.random.PRNGKey(0))
  outputs, _ = jax.eval_shape(network.unroll, params, network.dummy_input(2, 3), network.initial_state(3))
  assert outputs.logits.shape == (2, 3, 6) and outputs.value.shape == (2, 3)
  assert outputs.attention is None and outputs.queries is None
  assert network.has_attention is False


def test_fixed_query_attention_does_not_depend_on_the_lstm_state():
  network = small_network('fixed_query')
  params = network.init(jax.random.PRNGKey(0))
  inputs = random_inputs(network, 1, 4)
  state_a, state_b = random_state(network, 4, 1), random_state(network, 4, 2)
  state_b = state_b._replace(vision=state_a.vision)  # same vision state, different LSTM state
  out_a, _ = network.unroll(params, inputs, state_a)
  out_b, _ = network.unroll(params, inputs, state_b)
  np.testing.assert_array_equal(out_a.queries, out_b.queries)
  np.testing.assert_allclose(out_a.attention, out_b.attention, rtol=1e-6)
  assert not np.allclose(out_a.value, out_b.value)  # the LSTM state still matters downstream


def test_top_down_attention_depends_on_the_lstm_state():
  network = small_network('s3ta')
  params = network.init(jax.random.PRNGKey(0))
  inputs = random_inputs(network, 1, 4)
  state_a, state_b = random_state(network, 4, 1), random_state(network, 4, 2)
  state_b = state_b._replace(vision=state_a.vision)
  out_a, _ = network.unroll(params, inputs, state_a)
  out_b, _ = network.unroll(params, inputs, state_b)
  assert not np.allclose(out_a.queries, out_b.queries)
  assert not np.allclose(out_a.attention, out_b.attention)


@pytest.mark.parametrize('norm', [False, True])
def test_query_input_norm_makes_queries_independent_of_the_lstm_state_scale(norm):
  """At initialisation (zero biases, ReLU) the queries are linear in the LSTM's hidden state:
  a state 10x smaller gives queries 10x smaller, which is why they start near zero. With
  `query_input_norm` the query MLP sees the state LayerNormed, so the scale drops out."""
  network = make_network(dict(SMALL, query_input_norm=norm), 3, (6, 5, 3))
  params = network.init(jax.random.PRNGKey(0))
  assert ('query_input_norm' in params['core']) == norm
  inputs = random_inputs(network, 1, 4)
  state = random_state(network, 4, 1)
  small = state._replace(core=(state.core[0], state.core[1] / 10))
  queries = network.unroll(params, inputs, state)[0].queries
  small_queries = network.unroll(params, inputs, small)[0].queries
  assert np.abs(queries).mean() > 0.1
  np.testing.assert_allclose(small_queries, queries if norm else queries / 10, rtol=1e-3, atol=1e-6)


def test_query_norm_gives_each_head_unit_variance_queries_and_a_peaked_start():
  """`query_norm` LayerNorms each head's query over its key + basis channels: mean 0 and
  variance 1 whatever the LSTM state's scale, so the logits vary over space from the first
  update instead of starting uniform (the queries otherwise start near zero, see above)."""
  network = make_network(dict(SMALL, query_norm=True), 3, (6, 5, 3))
  params = network.init(jax.random.PRNGKey(0))
  inputs = random_inputs(network, 1, 4)
  state = random_state(network, 4, 1)
  small = state._replace(core=(state.core[0], state.core[1] / 10))
  out = network.unroll(params, inputs, small)[0]
  queries = np.asarray(out.queries)
  assert queries.shape == (1, 4, SMALL['num_heads'], 4 + 4)  # key channels + (2F)^2 basis
  np.testing.assert_allclose(queries.mean(-1), 0.0, atol=1e-5)
  np.testing.assert_allclose(queries.var(-1), 1.0, atol=1e-2)
  plain = small_network()
  plain_out = plain.unroll(plain.init(jax.random.PRNGKey(0)), inputs, small)[0]
  uniform = 1 / (6 * 5)
  assert np.asarray(plain_out.attention).max() < uniform * 1.3  # small queries: near uniform (1.2)
  assert np.asarray(out.attention).max() > uniform * 3  # 6.5 here
  # Where the whole state is zero (an episode's first step) the query is zero either way.
  first = network.unroll(params, inputs, network.initial_state(4))[0]
  np.testing.assert_allclose(first.queries, 0.0, atol=1e-6)
  with pytest.raises(ValueError, match="query_norm=True applies to kind='s3ta' only"):
    NetworkConfig(**dict(SMALL, kind='fixed_query', query_norm=True))


@pytest.mark.parametrize('k', [1, 2, 37, 60])
def test_order_statistic_uint8_is_the_kth_smallest(k):
  """The counting search returns np.sort's k-th value per frame and channel, ties included
  (a frame of one colour with a few other pixels, as Atari screens are)."""
  rng = np.random.default_rng(k)
  values = rng.integers(0, 256, size=(3, 6, 10, 2)).astype(np.uint8)
  values[1] = 87
  values[1, 0, :3, 0] = [0, 255, 86]
  got = np.asarray(agent_lib.order_statistic_uint8(jnp.asarray(values), k, axis=(1, 2)))
  expected = np.sort(values.reshape(3, 60, 2).astype(np.int32), axis=1)[:, k - 1]
  assert got.shape == (3, 1, 1, 2)
  np.testing.assert_array_equal(got[:, 0, 0], expected)


@pytest.mark.parametrize('height,width,dtype', [(6, 10, jnp.float32), (7, 9, jnp.float32),
                                                 (6, 10, jnp.bfloat16)])
def test_background_median_equals_jnp_median(height, width, dtype):
  """Sort-free for uint8 frames, and the same numbers as jnp.median of the scaled frames for
  even (midpoint of two) and odd pixel counts and in bfloat16."""
  rng = np.random.default_rng(height)
  frames = rng.integers(0, 256, size=(4, height, width, 3)).astype(np.uint8)
  frames[2] = [144, 72, 17]
  expected = jnp.median((jnp.asarray(frames).astype(dtype) / 255.0).astype(jnp.float32),
                        axis=(1, 2), keepdims=True).astype(dtype)
  got = agent_lib.background_median(jnp.asarray(frames), dtype)
  assert got.dtype == dtype and got.shape == (4, 1, 1, 3)
  np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(expected, np.float32))
  as_float = agent_lib.background_median(jnp.asarray(frames, jnp.float32), dtype)  # jnp.median
  np.testing.assert_array_equal(np.asarray(as_float, np.float32), np.asarray(expected, np.float32))
  assert 'sort' not in jax.jit(agent_lib.background_median).lower(frames).as_text()


def test_subtract_background_makes_the_torso_blind_to_the_background_colour():
  """`subtract_background` removes each frame's per-channel median before the ConvNet: a
  uniform frame gives the all-zero input's features (zero at initialisation: zero biases),
  and the same objects on two background colours give the same features."""
  config = NetworkConfig(**dict(SMALL, subtract_background=True))
  torso = agent_lib.ConvTorso(config)
  background = np.full((2, 6, 5, 3), [144, 72, 17], np.uint8)  # Pong's brown
  objects = background.copy()
  objects[:, 1, 2] = [92, 186, 92]  # a paddle pixel in each frame
  objects[1, 4, 0] = [200, 200, 200]  # and a ball in the second
  params = torso.init(jax.random.PRNGKey(0), objects)
  features = lambda frames: np.asarray(torso.apply(params, frames))
  np.testing.assert_allclose(features(background), 0.0, atol=1e-6)
  brighter = (objects.astype(np.int16) + [40, 30, 20]).astype(np.uint8)  # a brighter background
  np.testing.assert_allclose(features(brighter), features(objects), atol=1e-5)
  plain = agent_lib.ConvTorso(NetworkConfig(**SMALL))
  plain_features = lambda frames: np.asarray(plain.apply(params, frames))
  assert np.abs(plain_features(background)).max() > 1e-2  # without it the colour shows
  assert np.abs(plain_features(brighter) - plain_features(objects)).max() > 1e-3
  with pytest.raises(ValueError, match=r"subtract_background=True applies to the attention kinds"):
    NetworkConfig(**dict(SMALL, kind='resnet_lstm', subtract_background=True))


def test_key_norm_normalises_each_locations_key_channels():
  """`key_norm` LayerNorms the key channels of every location (not the basis, not over space):
  at initialisation each location's keys have mean 0 and variance 1 over their channels."""
  config = NetworkConfig(**dict(SMALL, key_norm=True))
  core = agent_lib.S3TACore(config, 3, attention_lib.spatial_basis(6, 5, 1))
  network = make_network(config, 3, (6, 5, 3))
  rng = np.random.default_rng(0)
  step = (rng.normal(size=(3, 6, 5, 4 * SMALL['vision_lstm_channels'])).astype(np.float32),
          np.zeros(3, np.int32), np.zeros(3, np.float32), np.zeros(3, bool))
  state = random_state(network, 3, 1)
  variables = core.init(jax.random.PRNGKey(0), state, step, 0.0)
  _, captured = core.apply(variables, state, step, 0.0, capture_intermediates=True,
                           mutable=['intermediates'])
  keys = np.asarray(captured['intermediates']['key_norm']['__call__'][0])
  assert keys.shape == (3, 6, 5, SMALL['key_channels'])  # [B, h, w, key channels]
  np.testing.assert_allclose(keys.mean(-1), 0.0, atol=1e-5)
  np.testing.assert_allclose(keys.var(-1), 1.0, atol=1e-2)
  assert 'key_norm' not in small_network().init(jax.random.PRNGKey(0))['core']


def test_l2_keys_attention_is_the_softmax_of_key_norms_shared_by_heads():
  network = small_network('l2_keys')
  params = network.init(jax.random.PRNGKey(0))
  outputs, _ = network.unroll(params, random_inputs(network, 2, 3), network.initial_state(3))
  np.testing.assert_allclose(outputs.attention[:, :, 0], outputs.attention[:, :, 1])
  np.testing.assert_array_equal(outputs.queries, 0.0)


@pytest.mark.parametrize('kind', ['s3ta', 'resnet_lstm'])
def test_state_is_reset_at_episode_starts(kind):
  network = small_network(kind)
  params = network.init(jax.random.PRNGKey(0))
  inputs = random_inputs(network, 1, 3, first=True)
  from_random, _ = network.unroll(params, inputs, random_state(network, 3, 5))
  from_zero, _ = network.unroll(params, inputs, network.initial_state(3))
  np.testing.assert_allclose(from_random.logits, from_zero.logits, rtol=1e-6)
  np.testing.assert_allclose(from_random.value, from_zero.value, rtol=1e-6)
  # Without is_first the state is used, so outputs differ.
  carried, _ = network.unroll(params, inputs._replace(is_first=np.zeros((1, 3), bool)),
                              random_state(network, 3, 5))
  assert not np.allclose(carried.value, from_zero.value)


def test_reset_applies_per_environment_and_mid_unroll():
  network = small_network('s3ta')
  params = network.init(jax.random.PRNGKey(0))
  inputs = random_inputs(network, 4, 2)
  is_first = np.zeros((4, 2), bool)
  is_first[2, 0] = True  # env 0 starts a new episode at t = 2
  inputs = inputs._replace(is_first=is_first)
  state = random_state(network, 2, 3)
  outputs, _ = network.unroll(params, inputs, state)
  # Env 0 from t = 2 equals a fresh unroll of its steps 2..3 from the zero state.
  tail = jax.tree_util.tree_map(lambda x: x[2:, :1], inputs)
  fresh, _ = network.unroll(params, tail, network.initial_state(1))
  np.testing.assert_allclose(outputs.value[2:, 0], fresh.value[:, 0], rtol=1e-5, atol=1e-6)
  # Env 1 never resets: its outputs equal an unroll of env 1 alone with its state.
  env1 = jax.tree_util.tree_map(lambda x: x[:, 1:], inputs)
  alone, _ = network.unroll(params, env1, jax.tree_util.tree_map(lambda x: x[1:], state))
  np.testing.assert_allclose(outputs.value[:, 1], alone.value[:, 0], rtol=1e-5, atol=1e-6)


def test_state_is_carried_across_unroll_calls():
  network = small_network('s3ta')
  params = network.init(jax.random.PRNGKey(0))
  inputs = random_inputs(network, 4, 2)
  whole, final_whole = network.unroll(params, inputs, network.initial_state(2))
  first_half = jax.tree_util.tree_map(lambda x: x[:2], inputs)
  second_half = jax.tree_util.tree_map(lambda x: x[2:], inputs)
  out1, mid = network.unroll(params, first_half, network.initial_state(2))
  out2, final_split = network.unroll(params, second_half, mid)
  np.testing.assert_allclose(np.concatenate([out1.value, out2.value]), whole.value, rtol=1e-5, atol=1e-6)
  for a, b in zip(jax.tree_util.tree_leaves(final_whole), jax.tree_util.tree_leaves(final_split)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_step_matches_a_one_step_unroll_and_threshold_one_is_hard_attention():
  network = small_network('s3ta')
  params = network.init(jax.random.PRNGKey(0))
  inputs = random_inputs(network, 1, 2)
  step_out, _ = network.step(params, jax.tree_util.tree_map(lambda x: x[0], inputs), network.initial_state(2))
  unroll_out, _ = network.unroll(params, inputs, network.initial_state(2))
  np.testing.assert_allclose(step_out.logits, unroll_out.logits[0], rtol=1e-6)
  # From a non-zero LSTM state the queries (hence the logits) are not all zero.
  hard, _ = network.unroll(params, inputs, random_state(network, 2, 4), attention_threshold=1.0)
  np.testing.assert_allclose(np.asarray(hard.attention).max(axis=(-2, -1)), 1.0, rtol=1e-6)


@pytest.mark.parametrize('bad,match', [
    (dict(kind='transformer'), 'Unknown network kind'),
    (dict(key_channels=200), 'key_channels'),
    (dict(conv_kernels=(8,)), 'equal lengths'),
    (dict(lstm_sise=3), 'Unknown network config field'),
    (dict(time_activation='gelu'), r"time_activation must be one of \('relu', 'leaky_relu', 'tanh', 'none'\), got 'gelu'"),
    (dict(time_hidden_activation='gelu'), r"time_hidden_activation must be one of \('relu', .*\), got 'gelu'"),
    (dict(awrl_hidden_activation='elu'), r"awrl_hidden_activation must be one of \('relu', .*\), got 'elu'"),
    (dict(time_token_norm='batch'), r"time_token_norm must be one of \('none', 'layer', 'scale_only'\), got 'batch'"),
    (dict(time_readout='mean'), r"time_readout must be one of \('all', 'newest'\), got 'mean'"),
    (dict(kind='l2_keys', key_norm=True), "key_norm=True does not apply to kind='l2_keys'"),
    (dict(scan_unroll=0), 'scan_unroll must be >= 1, got 0'),
    (dict(conv_strides=(0, 1)), r'conv_strides must be integers >= 1, got \(0, 1\)'),  # a division by 0
    (dict(nature_kernels=(8, 4, 2.5)), r'nature_kernels must be integers >= 1, got \(8, 4, 2.5\)'),
    (dict(resnet_channels=(16, -32, 32)), r'resnet_channels must be integers >= 1'),
    (dict(query_init_scale=float('nan')), r'network.query_init_scale must be a number, got nan'),
])
def test_bad_network_config_is_rejected_with_a_clear_message(bad, match):
  with pytest.raises(ValueError, match=match):
    NetworkConfig.from_dict(bad)


@pytest.mark.parametrize('kind', ['s3ta', 'resnet_lstm'])
@pytest.mark.parametrize('runtime', [dict(remat=True), dict(scan_unroll=3), dict(scan_unroll=4),
                                     dict(remat=True, scan_unroll=2)])
def test_remat_and_scan_unroll_keep_parameters_outputs_and_gradients(kind, runtime):
  """`remat` trades memory for recomputation and `scan_unroll` loop iterations for code size
  (3 does not divide the 4 steps: a remainder): same parameter tree, same numbers."""
  plain = small_network(kind)
  remat = make_network(dict(SMALL, kind=kind, **runtime), 3, (6, 5, 3))
  params = plain.init(jax.random.PRNGKey(0))
  assert jax.tree_util.tree_structure(remat.init(jax.random.PRNGKey(0))) == (
      jax.tree_util.tree_structure(params))
  inputs, state = random_inputs(plain, 4, 2, seed=1), random_state(plain, 2, seed=2)

  def loss(network):
    def f(p):
      out, final = network.unroll(p, inputs, state)
      return jnp.sum(out.logits ** 2) + jnp.sum(out.value) + jnp.sum(final.core[0])
    return jax.value_and_grad(f)(params)

  (want, want_grads), (got, got_grads) = loss(plain), loss(remat)
  np.testing.assert_allclose(got, want, rtol=1e-6)
  jax.tree_util.tree_map(lambda g, w: np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6),
                         got_grads, want_grads)


@pytest.mark.parametrize('kind,flag,observation_shape', [
    ('time_attention', 'time_previous_inputs', (5, 5, 3 * 4)),
    ('resnet_lstm', 'lstm_previous_inputs', (5, 5, 3))])
@pytest.mark.parametrize('on', [False, True])
def test_previous_action_and_reward_reach_the_policy_only_when_asked(kind, flag, observation_shape, on):
  network = make_network({'kind': kind, flag: on, 'time_hidden': 0, 'resnet_channels': (4,),
                          'resnet_blocks': 1, 'resnet_hidden': 8, 'lstm_size': 8}, 5,
                         observation_shape)
  params = network.init(jax.random.PRNGKey(0))
  frames = np.random.default_rng(0).integers(0, 256, (1, 2) + observation_shape).astype(np.uint8)
  is_first = np.zeros((1, 2), bool)
  logits = lambda action, reward: np.asarray(network.unroll(
      params, AgentInput(frames, np.full((1, 2), action, np.int32), np.full((1, 2), reward, np.float32),
                         is_first), network.initial_state(2))[0].logits)
  change = max(np.abs(logits(3, 0.0) - logits(0, 0.0)).max(), np.abs(logits(0, 1.0) - logits(0, 0.0)).max())
  assert (change > 1e-5) == on
