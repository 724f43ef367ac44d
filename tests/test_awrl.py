"""d-AWRL and g-AWRL (paper 003, `s3ta/networks/awrl.py`): the attention module against a
NumPy computation, map shapes and normalisation, static address-only maps, content-only
permutation equivariance, the address projections computed once, and bad settings named."""

import jax
import numpy as np
import pytest

from s3ta.networks import AgentInput, NetworkConfig, make_network, parameter_counts
from s3ta.networks.awrl import AttentionModule, SplitTokens, TokenDense, positional_encoding

pytestmark = pytest.mark.core  # pure-JAX core only: also run on current JAX

F, T = 5, 3  # features x history: L = 15 tokens


def _unroll(kind, observation, **config):
  network = make_network(dict({'kind': kind, 'awrl_key_size': 8, 'awrl_model_size': 8,
                               'awrl_hidden': 16}, **config), 4, (F, T, 1))
  params = network.init(jax.random.PRNGKey(0))
  out, _ = network.unroll(params, _one_step(observation), network.initial_state(len(observation)))
  return jax.tree_util.tree_map(lambda x: np.asarray(x[0]), out)


def _one_step(observations):
  """One time step of agent inputs for a batch [N, ...] of observations (no previous action)."""
  n = len(observations)
  return AgentInput(observations[None], np.zeros((1, n), np.int32), np.zeros((1, n), np.float32),
                    np.zeros((1, n), bool))


def _observations(seed, batch=2):
  return np.random.default_rng(seed).integers(0, 256, (batch, F, T, 1)).astype(np.uint8)


@pytest.mark.parametrize('selection_only', [False, True])
def test_attention_module_matches_a_numpy_computation(selection_only):
  rng = np.random.default_rng(0)
  tokens = rng.normal(size=(2, 6, 5)).astype(np.float32)
  module = AttentionModule(num_heads=2, key_size=3, model_size=4, selection_only=selection_only)
  params = module.init(jax.random.PRNGKey(1), tokens, tokens)['params']
  out, maps = module.apply({'params': params}, tokens, tokens)
  dense = lambda name, x: x @ np.asarray(params[name]['kernel']) + np.asarray(params[name]['bias'])
  heads = lambda name: dense(name, tokens).reshape(2, 6, 2, 3)
  q, k, e = heads('query'), heads('key'), heads('embedding')
  if selection_only:  # one score per token: the diagonal of Q K^T, softmax over tokens
    logits = np.einsum('blhd,blhd->bhl', q, k) / np.sqrt(3)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    mixed = np.einsum('bhl,blhd->blhd', weights, e)
  else:
    logits = np.einsum('bihd,bjhd->bhij', q, k) / np.sqrt(3)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    mixed = np.einsum('bhij,bjhd->bihd', weights, e)
  up = dense('upscale', mixed.reshape(2, 6, 6))
  # g-AWRL normalises each token; d-AWRL a sample's tokens together (keeping each a_i).
  axes = (-2, -1) if selection_only else -1
  normed = (up - up.mean(axes, keepdims=True)) / np.sqrt(up.var(axes, keepdims=True) + 1e-6)
  normed = normed * np.asarray(params['norm']['scale']) + np.asarray(params['norm']['bias'])
  np.testing.assert_allclose(maps, weights, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out, normed, rtol=1e-4, atol=1e-5)


def test_token_dense_has_dense_parameters_and_computes_split_tokens_once_per_token():
  """TokenDense initialises exactly as nn.Dense (checkpoints unchanged) and gives the same
  projection of [content, address] whether the address part comes shared or per sample."""
  import flax.linen as nn  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  content = rng.uniform(size=(3, 6, 1)).astype(np.float32)
  address = positional_encoding(6, 4).astype(np.float32)
  joined = np.concatenate([content, np.broadcast_to(address, (3, 6, 4))], -1)
  dense_params = nn.Dense(8).init(jax.random.PRNGKey(2), joined)['params']
  params = TokenDense(8).init(jax.random.PRNGKey(2), SplitTokens(content, address))['params']
  jax.tree_util.tree_map(np.testing.assert_array_equal, params, dense_params)
  expected = joined @ np.asarray(params['kernel']) + np.asarray(params['bias'])
  split = TokenDense(8).apply({'params': params}, SplitTokens(content, address))
  assert split.shape == (3, 6, 8)
  np.testing.assert_allclose(split, expected, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(TokenDense(8).apply({'params': params}, joined), expected,
                             rtol=1e-6, atol=1e-6)
  address_only = SplitTokens(content[..., :0], address)  # 'address' attention: a [L, a] kernel
  params = TokenDense(8).init(jax.random.PRNGKey(2), address_only)['params']
  jax.tree_util.tree_map(np.testing.assert_array_equal, params,
                         nn.Dense(8).init(jax.random.PRNGKey(2), joined[..., 1:])['params'])
  shared = TokenDense(8).apply({'params': params}, address_only)
  assert shared.shape == (6, 8)  # one row per token, the same for every sample
  np.testing.assert_allclose(shared, address @ np.asarray(params['kernel']) + np.asarray(params['bias']),
                             rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize('selection_only', [False, True])
def test_attention_module_on_split_tokens_equals_it_on_joined_tokens(selection_only):
  rng = np.random.default_rng(3)
  content = rng.uniform(size=(2, 6, 1)).astype(np.float32)
  address = positional_encoding(6, 4).astype(np.float32)
  joined = np.concatenate([content, np.broadcast_to(address, (2, 6, 4))], -1)
  module = AttentionModule(num_heads=2, key_size=3, model_size=4, selection_only=selection_only)
  params = module.init(jax.random.PRNGKey(1), joined, joined)
  split = SplitTokens(content, address)
  for got, want in zip(module.apply(params, split, split), module.apply(params, joined, joined)):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('kind', ['gawrl', 'dawrl'])
def test_policies_start_near_uniform_at_paper_sizes(kind):
  # d-AWRL once summed its 32 normalised tokens into the heads: logits up to 46 at
  # initialisation, a deterministic policy before any update, and PPO never recovered.
  network = make_network({'kind': kind}, 6, (8, 4, 1))  # Pong: 8 features x 4 steps
  _, entropy = _pong_logits_and_entropy(network, network.init(jax.random.PRNGKey(0)))
  assert entropy.mean() >= 0.7 * np.log(6), entropy.mean()


def _pong_logits_and_entropy(network, params):
  """Logits [64, A] and policy entropies [64] on 64 random RAM-Pong-shaped observations."""
  observation = np.random.default_rng(0).integers(0, 256, (64, 8, 4, 1)).astype(np.uint8)
  logits = np.asarray(
      network.unroll(params, _one_step(observation), network.initial_state(64))[0].logits[0])
  log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  return logits, -(np.exp(log_p) * log_p).sum(-1)


def test_map_shapes_and_normalisation():
  g = _unroll('gawrl', _observations(0))
  d = _unroll('dawrl', _observations(0))
  assert g.logits.shape == d.logits.shape == (2, 4) and g.value.shape == (2,)
  assert g.attention.shape == (2, 4, F * T, F * T)  # heads x query token x key token
  assert d.attention.shape == (2, 4, F * T)  # selection only: one weight per token
  np.testing.assert_allclose(g.attention.sum(-1), 1.0, rtol=1e-5)
  np.testing.assert_allclose(d.attention.sum(-1), 1.0, rtol=1e-5)


@pytest.mark.parametrize('kind', ['gawrl', 'dawrl'])
def test_address_only_maps_are_static_and_content_maps_are_not(kind):
  a, b = _observations(1), _observations(2)
  static = [_unroll(kind, x, awrl_attention='address').attention for x in (a, b)]
  np.testing.assert_allclose(static[0], static[1], atol=1e-6)
  content = [_unroll(kind, x, awrl_attention='both').attention for x in (a, b)]
  assert np.abs(content[0] - content[1]).max() > 1e-4


def test_content_only_first_layer_maps_follow_a_permutation_of_the_features():
  observation = _observations(3, batch=1)
  perm = np.array([3, 0, 4, 1, 2])
  token_perm = (perm[:, None] * T + np.arange(T)).reshape(-1)  # tokens are feature-major
  maps = _unroll('gawrl', observation, awrl_attention='content').attention[0]
  permuted = _unroll('gawrl', observation[:, perm], awrl_attention='content').attention[0]
  np.testing.assert_allclose(permuted, maps[:, token_perm][:, :, token_perm], atol=1e-5)


def test_positional_encoding_is_bounded_and_distinct_per_position():
  encoding = positional_encoding(20, 8)
  assert encoding.shape == (20, 8) and np.abs(encoding).max() <= 1.0
  assert len({tuple(np.round(row, 5)) for row in encoding}) == 20


@pytest.mark.parametrize('field, value, match', [
    ('awrl_attention', 'pixels', "awrl_attention must be one of \\('both', 'content', 'address'\\)"),
    ('awrl_position_size', 7, 'awrl_position_size must be an even number >= 2, got 7'),
    ('awrl_heads', 0, 'awrl_heads must be >= 1, got 0'),
    ('awrl_hidden', -1, 'awrl_hidden must be >= 0 \\(0: no dense layer\\), got -1'),
    ('awrl_norm_over', 'batch', "awrl_norm_over must be one of \\('channels', 'tokens'\\), got 'batch'"),
])
def test_bad_awrl_settings_are_named(field, value, match):
  with pytest.raises(ValueError, match=match):
    make_network({'kind': 'gawrl', field: value}, 4, (F, T, 1))


def test_feature_cnn_baselines():
  from s3ta.networks import feature_cnn, parameter_count  # pylint: disable=g-import-not-at-top
  assert [feature_cnn.acnn_layers(n) for n in (1, 3, 8, 41, 164)] == [1, 1, 4, 20, 20]
  counts = {}
  for kind in ('cnn1d', 'acnn'):
    network = make_network({'kind': kind, 'cnn_channels': 4, 'cnn_hidden': 8}, 4, (F, T, 1))
    params = network.init(jax.random.PRNGKey(0))
    counts[kind] = parameter_count(params)
    out = _unroll(kind, _observations(4), cnn_channels=4, cnn_hidden=8)
    assert out.logits.shape == (2, 4) and np.all(np.isfinite(out.logits)) and out.attention is None
  # cnn1d: 2 layers x 3 widths; conv params (w * in + 1) * 4 per width, then the dense layers.
  first = sum((w * T + 1) * 4 for w in (3, 5, 7))
  second = sum((w * 12 + 1) * 4 for w in (3, 5, 7))
  assert counts['cnn1d'] == first + second + (F * 12 + 1) * 8 + (8 + 1) * 4 + (8 + 1)
  layers = feature_cnn.acnn_layers(F)  # 2 for 5 features
  assert counts['acnn'] == ((3 * T + 1) * 4 + (layers - 1) * (3 * 4 + 1) * 4 +
                            (F * 4 + 1) * 8 + (8 + 1) * 4 + (8 + 1))


@pytest.mark.parametrize('readout,head_inputs', [('all', 8 * 32), ('newest', 32)])
def test_attention_over_time_maps_cover_the_past_views_and_memory_matters(readout, head_inputs):
  network = make_network({'kind': 'time_attention', 'time_hidden': 0, 'time_readout': readout},
                         5, (5, 5, 3 * 8))  # 8 views of 5x5x3
  params = network.init(jax.random.PRNGKey(0))
  assert params['core']['head']['policy']['kernel'].shape == (head_inputs, 5)  # d_v 32 per token
  rng = np.random.default_rng(5)
  views = rng.integers(0, 2, (1, 1, 5, 5, 24)).astype(np.uint8) * 255
  run = lambda obs: jax.tree_util.tree_map(np.asarray, network.unroll(
      params, AgentInput(obs, np.zeros((1, 1), np.int32), np.zeros((1, 1), np.float32),
                         np.zeros((1, 1), bool)), network.initial_state(1))[0])
  out = run(views)
  assert out.attention.shape == (1, 1, 4, 8)  # heads x past views
  np.testing.assert_allclose(out.attention.sum(-1), 1.0, rtol=1e-5)
  older = views.copy()
  older[..., :3] = 255 - older[..., :3]  # only the oldest view differs
  changed = run(older)
  assert np.abs(changed.logits - out.logits).max() > 1e-6  # the past reaches the policy
  assert np.abs(changed.attention - out.attention).max() > 1e-6


@pytest.mark.parametrize('residual', [False, True])
def test_under_uniform_attention_only_the_residual_tells_the_newest_view_from_the_oldest(residual):
  # Zero queries and keys make every map uniform, so each view reads the mean of all values:
  # swapping the contents of the newest and oldest views (their ages stay) changes nothing
  # unless each view also keeps its own values (`time_residual`).
  network = make_network({'kind': 'time_attention', 'time_hidden': 0, 'time_residual': residual},
                         5, (5, 5, 3 * 8))
  params = network.init(jax.random.PRNGKey(0))
  torso = params['torso']
  for name in ('query', 'key'):
    torso[name] = jax.tree_util.tree_map(np.zeros_like, torso[name])
  views = np.random.default_rng(6).integers(0, 2, (1, 1, 5, 5, 24)).astype(np.uint8) * 255
  swapped = views.copy()
  swapped[..., :3], swapped[..., -3:] = views[..., -3:], views[..., :3]
  run = lambda obs: jax.tree_util.tree_map(np.asarray, network.unroll(
      params, AgentInput(obs, np.zeros((1, 1), np.int32), np.zeros((1, 1), np.float32),
                         np.zeros((1, 1), bool)), network.initial_state(1))[0])
  out = run(views)
  np.testing.assert_allclose(out.attention, 1 / 8, rtol=1e-6)
  difference = np.abs(run(swapped).logits - out.logits).max()
  if residual:
    assert difference > 1e-4
  else:
    assert difference < 1e-5


@pytest.mark.parametrize('layer,activation,bias,norm', [
    ('output', 'relu', -100.0, 'none'), ('output', 'leaky_relu', -100.0, 'none'),
    ('output', 'none', -100.0, 'none'), ('output', 'relu', -100.0, 'scale_only'),
    ('token_norm', 'relu', -100.0, 'layer'), ('hidden', 'relu', -5.0, 'none'),
    ('hidden', 'tanh', -5.0, 'none'), ('hidden', 'none', -5.0, 'none')])
def test_time_attention_layer_pushed_negative_goes_constant_only_under_relu(layer, activation, bias,
                                                                            norm):
  # The collapse seen in PPO on the T-maze: every unit of the tokens ('output', nonlinearity
  # `time_activation`) or of the dense layer before the heads ('hidden', `time_hidden_activation`)
  # negative on every observation. Under ReLU the logits are then constant and no gradient
  # reaches the attention; the other activations keep both (tanh barely, at -5), and so does
  # relu after `time_token_norm='scale_only'`, which takes the shift back out of each token;
  # a LayerNorm's own learned shift ('layer') can still push every unit below zero.
  config = ({'time_hidden': 0, 'time_activation': activation, 'time_token_norm': norm}
            if layer in ('output', 'token_norm') else
            {'time_hidden': 16, 'time_activation': 'none', 'time_hidden_activation': activation})
  network = make_network({'kind': 'time_attention', **config}, 5, (5, 5, 3 * 4))
  params = network.init(jax.random.PRNGKey(0))
  params['torso'][layer]['bias'] = np.full_like(params['torso'][layer]['bias'], bias)
  views = np.random.default_rng(7).integers(0, 2, (1, 3, 5, 5, 12)).astype(np.uint8) * 255
  inputs = AgentInput(views, np.zeros((1, 3), np.int32), np.zeros((1, 3), np.float32),
                      np.zeros((1, 3), bool))
  logits = lambda p: network.unroll(p, inputs, network.initial_state(3))[0].logits
  spread = float(np.asarray(logits(params)).std(axis=1).max())  # across the 3 observations
  grads = jax.grad(lambda p: logits(p)[..., 0].sum())(params)
  query_grad = float(np.abs(np.asarray(grads['torso']['query']['kernel'])).max())
  if activation == 'relu' and norm != 'scale_only':
    assert spread == 0.0 and query_grad == 0.0
  else:
    assert spread > 1e-7 and query_grad > 0.0


def test_time_attention_dense_layer_with_skip_is_the_plain_agent_plus_what_live_units_add():
  # `time_hidden_skip`: the heads read the T * d_v tokens and the dense layer's units. With every
  # relu unit dead, the logits are exactly those of the agent without the layer (its tokens through
  # the first T * d_v rows of the head), so PPO's collapse of the units cannot stop the linear path.
  config = {'kind': 'time_attention', 'time_activation': 'none', 'time_hidden_activation': 'relu'}
  skip = make_network(dict(config, time_hidden=16, time_hidden_skip=True), 5, (5, 5, 3 * 4))
  plain = make_network(dict(config, time_hidden=0), 5, (5, 5, 3 * 4))
  params = skip.init(jax.random.PRNGKey(0))
  policy = params['core']['head']['policy']
  assert policy['kernel'].shape == (4 * 32 + 16, 5)  # T * d_v tokens, then the 16 units
  views = np.random.default_rng(8).integers(0, 2, (1, 3, 5, 5, 12)).astype(np.uint8) * 255
  inputs = AgentInput(views, np.zeros((1, 3), np.int32), np.zeros((1, 3), np.float32),
                      np.zeros((1, 3), bool))
  logits = lambda network, p: np.asarray(network.unroll(p, inputs, network.initial_state(3))[0].logits)
  alive = logits(skip, params)
  params['torso']['hidden']['bias'] = np.full_like(params['torso']['hidden']['bias'], -100.0)
  dead = logits(skip, params)
  without = jax.tree_util.tree_map(lambda x: x, params)
  del without['torso']['hidden']
  for head in ('policy', 'value'):
    without['core']['head'][head]['kernel'] = params['core']['head'][head]['kernel'][:4 * 32]
  np.testing.assert_allclose(dead, logits(plain, without), rtol=1e-5, atol=1e-6)
  assert np.abs(alive - dead).max() > 1e-4  # live units do add to the logits
  assert dead.std(axis=1).max() > 1e-4  # and the dead layer leaves them varying with the views


def test_time_hidden_skip_without_a_dense_layer_is_rejected():
  with pytest.raises(ValueError, match=r'time_hidden_skip=True needs .* got time_hidden=0'):
    NetworkConfig.from_dict({'kind': 'time_attention', 'time_hidden': 0, 'time_hidden_skip': True})


@pytest.mark.parametrize('activation', ['relu', 'tanh', 'none'])
def test_gawrl_dense_layer_pushed_negative_dies_only_under_relu(activation):
  # RAM Pong under PPO left 5 of g-AWRL's 64 relu units ever positive. A layer pushed below
  # zero everywhere gives constant logits and no gradient to the attention under relu only.
  # (tanh saturates instead: its gradient is small at -5 and exactly zero in float32 at -100.)
  network = make_network({'kind': 'gawrl', 'awrl_key_size': 8, 'awrl_model_size': 8,
                          'awrl_hidden': 16, 'awrl_hidden_activation': activation}, 4, (F, T, 1))
  params = network.init(jax.random.PRNGKey(0))
  params['torso']['output']['bias'] = np.full_like(params['torso']['output']['bias'], -5.0)
  inputs = _one_step(_observations(8, batch=3))
  logits = lambda p: network.unroll(p, inputs, network.initial_state(3))[0].logits
  spread = float(np.asarray(logits(params)).std(axis=1).max())  # across the 3 observations
  grads = jax.grad(lambda p: logits(p)[..., 0].sum())(params)
  query_grad = float(np.abs(np.asarray(grads['torso']['attention_0']['query']['kernel'])).max())
  if activation == 'relu':
    assert spread == 0.0 and query_grad == 0.0
  else:
    assert spread > 1e-6 and query_grad > 0.0


def _dense_layer_inputs(observations, **config):
  """g-AWRL's pre-activations before its heads (the `output` layer) and the attention maps."""
  network = make_network(dict({'kind': 'gawrl', 'awrl_key_size': 8, 'awrl_model_size': 8,
                               'awrl_hidden': 16, 'awrl_hidden_activation': 'none'}, **config),
                         4, (F, T, 1))
  params = network.init(jax.random.PRNGKey(0))
  params['torso']['output']['bias'] = np.linspace(-1, 1, 16).astype(np.float32)
  n = len(observations)
  out, captured = network.module.apply({'params': params}, _one_step(observations),
                                       network.initial_state(n),
                                       capture_intermediates=True, mutable=['intermediates'])
  hidden = captured['intermediates']['torso']['output']['__call__'][0]
  return np.asarray(hidden).reshape(n, -1), np.asarray(out[0].attention[0]), params


def test_centred_tokens_remove_only_what_every_observation_shares():
  # RAM Pong: the dense layer's pre-activations were a per-unit offset (0.53) that the
  # observation barely moved (0.013), so relu units sat on one side for good. Centring
  # subtracts the tokens of a mid-range observation: a constant per unit, the same
  # differences between observations, and a mid-range observation maps to the bias.
  mid = np.full((1, F, T, 1), 128, np.uint8)
  observations = np.concatenate([_observations(4, batch=3), mid])
  plain, plain_maps, _ = _dense_layer_inputs(observations)
  centred, centred_maps, params = _dense_layer_inputs(observations, awrl_centre_tokens=True)
  np.testing.assert_allclose(centred[-1], params['torso']['output']['bias'], atol=1e-5)
  np.testing.assert_allclose(centred[:-1] - centred[-1], plain[:-1] - plain[-1], atol=1e-5)
  assert np.abs(plain[-1] - params['torso']['output']['bias']).max() > 0.1  # the offset
  assert centred_maps.shape == plain_maps.shape == (4, 4, F * T, F * T)  # no extra row
  np.testing.assert_allclose(centred_maps, plain_maps, atol=1e-6)


def test_centring_leaves_dawrl_unchanged():
  # d-AWRL has no hidden layer: an offset before its linear heads is just a bias.
  observations = _observations(5, batch=3)
  plain, centred = (_unroll('dawrl', observations, awrl_centre_tokens=c) for c in (False, True))
  np.testing.assert_array_equal(plain.logits, centred.logits)


def test_normalised_centred_tokens_move_the_dense_layer_more():
  # Centred alone, the layer's input barely moves (Pong: 0.013 against Adam's 2.5e-4 steps
  # on its bias), and relu units died again. A LayerNorm over the centred tokens scales
  # them to unit variance; a mid-range observation (zero centred tokens) still maps to the bias.
  observations = np.concatenate([_observations(6, batch=6), np.full((1, F, T, 1), 128, np.uint8)])
  centred, _, params = _dense_layer_inputs(observations, awrl_centre_tokens=True)
  scaled, _, _ = _dense_layer_inputs(observations, awrl_centre_tokens=True,
                                     awrl_norm_before_hidden=True)
  np.testing.assert_allclose(scaled[-1], params['torso']['output']['bias'], atol=1e-5)
  spread = lambda x: float(x[:-1].std(0).mean())  # across observations, per unit
  assert spread(scaled) > 5 * spread(centred), (spread(scaled), spread(centred))


def test_gawrl_without_its_dense_layer_has_002s_linear_heads_over_every_token():
  # `awrl_hidden=0`: on RAM Pong the dense layer's units died under relu and leaky relu alike,
  # and d-AWRL, whose linear heads read the flattened tokens, was the agent that learned.
  # Pong: 8 features x 4 steps = 32 tokens of 32 channels into 6 logits and a value, which
  # are 002 Table 3's attention-agent heads (6,150 and 1,025 parameters).
  config = {'kind': 'gawrl', 'awrl_hidden': 0, 'awrl_centre_tokens': True,
            'awrl_norm_before_hidden': True}
  network = make_network(config, 6, (8, 4, 1))
  params = network.init(jax.random.PRNGKey(0))
  counts = parameter_counts(params)
  assert (counts['policy'], counts['value']) == (6_150, 1_025)
  assert 'output' not in params['torso']  # no dense layer between tokens and heads
  logits, entropy = _pong_logits_and_entropy(network, params)
  assert entropy.mean() >= 0.7 * np.log(6), entropy.mean()  # near uniform at the start
  assert logits.std(0).mean() > 0.01  # and the observation moves the logits


def _second_module_tokens(**config):
  """g-AWRL's tokens after its second module [64, 32, 32] and its first maps, at Pong sizes."""
  network = make_network(dict({'kind': 'gawrl'}, **config), 6, (8, 4, 1))
  params = network.init(jax.random.PRNGKey(0))
  observation = np.random.default_rng(1).integers(0, 256, (64, 8, 4, 1)).astype(np.uint8)
  _, state = network.module.apply({'params': params}, _one_step(observation),
                                  network.initial_state(64),
                                  capture_intermediates=True, mutable=['intermediates'])
  tokens, _ = state['intermediates']['torso']['attention_1']['__call__'][0]
  _, first_maps = state['intermediates']['torso']['attention_0']['__call__'][0]
  return np.asarray(tokens), np.asarray(first_maps)


def test_residual_keeps_gawrl_tokens_apart_where_near_uniform_maps_merge_them():
  # Without a residual, near-uniform maps give every token the same mixture: after two
  # modules the 32 tokens of a sample are one vector repeated (d-AWRL's differ by ~0.8).
  plain, plain_maps = _second_module_tokens()
  residual, residual_maps = _second_module_tokens(awrl_residual=True)
  within = lambda tokens: float(tokens.std(axis=1).mean())  # over a sample's tokens
  assert within(plain) < 0.01, within(plain)
  assert within(residual) > 0.1, within(residual)  # 0.15 here
  np.testing.assert_allclose(residual_maps, plain_maps, atol=1e-6)  # same first maps


def test_dawrl_ignores_gawrl_only_settings():
  # One config serves every kind (experiments/ram_features.py sets g-AWRL's residual and
  # norm), so d-AWRL must compute the same function with them.
  observation = _observations(3, batch=4)
  plain = _unroll('dawrl', observation)
  with_gawrl_settings = _unroll('dawrl', observation, awrl_residual=True, awrl_norm_over='tokens',
                                awrl_centre_tokens=True)
  np.testing.assert_allclose(with_gawrl_settings.logits, plain.logits, atol=1e-6)
  np.testing.assert_allclose(with_gawrl_settings.value, plain.value, atol=1e-6)


def test_norm_over_tokens_separates_gawrl_tokens_and_observations():
  # Each channel normalised over a sample's tokens (003's batch norm keeps per-channel
  # statistics too) removes the mixture every token shares, so what tells tokens and
  # observations apart reaches O(1): per token, tokens are one vector repeated and an
  # observation moves them 0.014; per channel, 0.31 (d-AWRL's tokens move 0.25).
  per_token, _ = _second_module_tokens()
  per_channel, _ = _second_module_tokens(awrl_norm_over='tokens')
  np.testing.assert_allclose(per_channel.mean(axis=1), 0.0, atol=1e-4)  # LayerNorm's start:
  np.testing.assert_allclose(per_channel.std(axis=1), 1.0, atol=1e-2)  # scale 1, offset 0
  across = lambda tokens: float(tokens.std(axis=0).mean())  # over observations
  assert across(per_token) < 0.03, across(per_token)
  assert across(per_channel) > 0.2, across(per_channel)
