"""The pure-JAX V-trace stand-in: hand-computed values, and equality with rlax 0.1.7.

The rlax comparisons run only where rlax imports (the pinned stack); elsewhere they
skip and the hand-computed checks still run.
"""

import functools
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from s3ta.learning import rlax_standin
from s3ta.utils import rlax_import

pytestmark = pytest.mark.core

needs_rlax = pytest.mark.skipif(
    rlax_import.USING_STANDIN,
    reason=f'rlax does not import here ({rlax_import.STANDIN_REASON}); nothing to compare with')

TOL = dict(rtol=1e-6, atol=1e-6)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_failing_rlax_import_falls_back_to_the_standin_with_one_warning_line():
  # A fresh interpreter where importing rlax raises (as TFP does on new JAX); the loss must
  # still give test_losses' hand-computed on-policy value.
  code = textwrap.dedent("""
      import sys
      class BrokenRlax:
        def find_spec(self, name, path=None, target=None):
          if name == 'rlax':
            raise RuntimeError('TFP refused\\nsecond line')
      sys.meta_path.insert(0, BrokenRlax())
      import numpy as np
      from s3ta.learning import impala_loss, rlax_standin
      from s3ta.utils import rlax_import
      assert rlax_import.USING_STANDIN and rlax_import.rlax is rlax_standin
      loss, _ = impala_loss(np.zeros((3, 1, 2), np.float32),
                            np.array([[0.5], [1.0], [2.0], [3.0]], np.float32),
                            np.array([[0], [1], [0]], np.int32), np.zeros((3, 1, 2), np.float32),
                            np.array([[1.0], [0.0], [2.0]], np.float32),
                            np.array([[0.9], [0.0], [0.9]], np.float32))
      print(float(loss))
      """)
  result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, JAX_PLATFORMS='cpu'), timeout=300, check=False)
  assert result.returncode == 0, result.stderr
  assert float(result.stdout) == pytest.approx(3.639130, rel=1e-5)
  lines = [line for line in result.stderr.splitlines() if 'rlax' in line]
  assert lines == ['rlax could not be imported (RuntimeError: TFP refused); using '
                      's3ta.learning.rlax_standin, pure-JAX stand-ins tested equal to rlax 0.1.7.']


def test_off_policy_values_by_hand():
  # T=2, gamma 0.9, rewards 1, V = [1, 2], bootstrap 3, rho = [1.6, 0.4] (clip 1: [1, 0.4]).
  # delta_0 = 1 * (1 + 0.9*2 - 1) = 1.8; delta_1 = 0.4 * (1 + 0.9*3 - 2) = 0.68.
  # v_1 - V_1 = 0.68; v_0 - V_0 = 1.8 + 0.9 * min(1, 1.6) * 0.68 = 2.412.
  # q_0 = 1 + 0.9 * v_1 = 1 + 0.9 * 2.68 = 3.412; q_1 = 1 + 0.9 * 3 = 3.7.
  # pg advantage: [1 * (3.412 - 1), 0.4 * (3.7 - 2)] = [2.412, 0.68].
  out = rlax_standin.vtrace_td_error_and_advantage(
      jnp.array([1.0, 2.0]), jnp.array([2.0, 3.0]), jnp.ones(2), jnp.full(2, 0.9),
      jnp.array([1.6, 0.4]))
  np.testing.assert_allclose(out.errors, [2.412, 0.68], rtol=1e-6)
  np.testing.assert_allclose(out.q_estimate, [3.412, 3.7], rtol=1e-6)
  np.testing.assert_allclose(out.pg_advantage, [2.412, 0.68], rtol=1e-6)


def test_lambda_terminal_and_pg_clip_by_hand():
  # T=3, on the behaviour policy except rho_0 = 3 (clip_rho 2, clip_pg_rho inf), lambda 0.5,
  # episode ends after step 1 (discount 0), gamma 1, rewards [1, 2, 3], V = [0, 1, 2], V_3 = 4.
  # deltas: 2 * (1 + 1 - 0) = 4; 1 * (2 + 0 - 1) = 1; 1 * (3 + 4 - 2) = 5.
  # errors (c = lambda * min(1, rho) = 0.5): e_2 = 5; e_1 = 1 + 0 = 1; e_0 = 4 + 0.5 * 1 = 4.5.
  # q_0 = 1 + (0.5 * (1 + 1) + 0.5 * 1) = 2.5; q_1 = 2 + 0 = 2; q_2 = 3 + 4 = 7.
  # pg advantage (rho unclipped): [3 * (2.5 - 0), 2 - 1, 7 - 2] = [7.5, 1, 5].
  out = rlax_standin.vtrace_td_error_and_advantage(
      jnp.array([0.0, 1.0, 2.0]), jnp.array([1.0, 2.0, 4.0]), jnp.array([1.0, 2.0, 3.0]),
      jnp.array([1.0, 0.0, 1.0]), jnp.array([3.0, 1.0, 1.0]), lambda_=0.5,
      clip_rho_threshold=2.0, clip_pg_rho_threshold=np.inf)
  np.testing.assert_allclose(out.errors, [4.5, 1.0, 5.0], rtol=1e-6)
  np.testing.assert_allclose(out.q_estimate, [2.5, 2.0, 7.0], rtol=1e-6)
  np.testing.assert_allclose(out.pg_advantage, [7.5, 1.0, 5.0], rtol=1e-6)


def test_stop_target_gradients():
  v_tm1, v_t = jnp.array([0.0, 1.0]), jnp.array([1.0, 2.0])
  ones = jnp.ones(2)

  def sum_errors(v, stop):
    return jnp.sum(rlax_standin.vtrace_td_error_and_advantage(
        v, v_t, ones, ones, ones, stop_target_gradients=stop).errors)

  # Stopped targets: d/dV sum(v_s - V_s) = -1 per step.
  np.testing.assert_allclose(jax.grad(sum_errors)(v_tm1, True), [-1.0, -1.0])
  # Unstopped, on-policy, gamma 1 (v_t is a separate input): e_1 = r + v_t[1] - V_1 and
  # e_0 = r + v_t[0] - V_0 + e_1, so sum = e_0 + e_1 has gradient [-1, -2].
  np.testing.assert_allclose(jax.grad(sum_errors)(v_tm1, False), [-1.0, -2.0])


@pytest.mark.parametrize('bad, message', [
    (dict(v_tm1=jnp.zeros((2, 3))), 'v_tm1 must be a vector'),
    (dict(r_t=jnp.zeros(4)), 'equal shapes'),
    (dict(lambda_=jnp.ones(2)), 'lambda_ must be a scalar or a vector of shape'),
])
def test_bad_shapes_are_value_errors(bad, message):
  args = dict(v_tm1=jnp.zeros(3), v_t=jnp.zeros(3), r_t=jnp.zeros(3), discount_t=jnp.ones(3),
              rho_tm1=jnp.ones(3), lambda_=1.0)
  args.update(bad)
  with pytest.raises(ValueError, match=message):
    rlax_standin.vtrace_td_error_and_advantage(**args)


def random_inputs(seed: int, time: int, batch: int = 4):
  """Time-major [T, B] inputs as losses.py passes them: rho in ~[0.1, 10], ~25% zero discounts."""
  rng = np.random.default_rng(seed)
  f32 = lambda x: jnp.asarray(x, jnp.float32)
  values = rng.normal(size=(time + 1, batch))
  return dict(
      v_tm1=f32(values[:-1]), v_t=f32(values[1:]), r_t=f32(rng.normal(size=(time, batch))),
      discount_t=f32(0.99 * (rng.random((time, batch)) > 0.25)),
      rho_tm1=f32(np.exp(rng.normal(scale=1.0, size=(time, batch)))))


def batched(vtrace_fn, use_jit: bool, **kwargs):
  """vtrace_fn vmapped over axis 1 (as in losses.impala_loss), optionally jitted.

  Call it with the five [T, B] inputs as keywords; they are passed on positionally
  (vmap would map keyword arguments over axis 0, i.e. over time).
  """
  fn = jax.vmap(lambda *arrays: vtrace_fn(*arrays, **kwargs), in_axes=1, out_axes=1)
  fn = jax.jit(fn) if use_jit else fn
  return lambda v_tm1, v_t, r_t, discount_t, rho_tm1: fn(v_tm1, v_t, r_t, discount_t, rho_tm1)


SETTINGS = [
    dict(lambda_=1.0, clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0),
    dict(lambda_=0.9, clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0),
    dict(lambda_=1.0, clip_rho_threshold=2.0, clip_pg_rho_threshold=np.inf),
    dict(lambda_=0.9, clip_rho_threshold=np.inf, clip_pg_rho_threshold=2.0),
]


@needs_rlax
@pytest.mark.parametrize('use_jit', [True, False], ids=['jit', 'nojit'])
@pytest.mark.parametrize('time', [1, 5, 50])
@pytest.mark.parametrize('seed', [0, 1, 2])
@pytest.mark.parametrize('settings', SETTINGS, ids=lambda s: '-'.join(map(str, s.values())))
def test_outputs_equal_rlax(settings, seed, time, use_jit):
  inputs = random_inputs(seed, time)
  ours = batched(rlax_standin.vtrace_td_error_and_advantage, use_jit, **settings)(**inputs)
  theirs = batched(rlax_import.rlax.vtrace_td_error_and_advantage, use_jit, **settings)(**inputs)
  for field in ('errors', 'pg_advantage', 'q_estimate'):
    assert getattr(ours, field).shape == (time, 4)
    np.testing.assert_allclose(getattr(ours, field), getattr(theirs, field), err_msg=field, **TOL)
  assert np.any(np.asarray(ours.errors) != 0)  # not trivially equal


@needs_rlax
@pytest.mark.parametrize('time', [1, 5, 50])
def test_vector_lambda_equals_rlax(time):
  inputs = {k: v[:, 0] for k, v in random_inputs(7, time).items()}
  lambda_ = jnp.linspace(0.5, 1.0, time)
  ours = rlax_standin.vtrace_td_error_and_advantage(**inputs, lambda_=lambda_)
  theirs = rlax_import.rlax.vtrace_td_error_and_advantage(**inputs, lambda_=lambda_)
  for field in ('errors', 'pg_advantage', 'q_estimate'):
    np.testing.assert_allclose(getattr(ours, field), getattr(theirs, field), err_msg=field, **TOL)


@needs_rlax
@pytest.mark.parametrize('stop_target_gradients', [True, False])
@pytest.mark.parametrize('time', [1, 5, 50])
@pytest.mark.parametrize('seed', [0, 1])
@pytest.mark.parametrize('settings', SETTINGS[1:3], ids=['lambda0.9', 'clip2-inf'])
def test_value_gradients_equal_rlax(settings, seed, time, stop_target_gradients):
  inputs = random_inputs(seed, time)
  weights = jax.random.normal(jax.random.PRNGKey(seed), (3,) + inputs['v_tm1'].shape)

  def objective(vtrace_fn):
    def f(v_tm1):
      out = batched(vtrace_fn, True, stop_target_gradients=stop_target_gradients, **settings)(
          **dict(inputs, v_tm1=v_tm1))
      return sum(jnp.sum(w * x) for w, x in zip(weights, out))
    return jax.jit(jax.grad(f))

  ours = objective(rlax_standin.vtrace_td_error_and_advantage)(inputs['v_tm1'])
  theirs = objective(rlax_import.rlax.vtrace_td_error_and_advantage)(inputs['v_tm1'])
  np.testing.assert_allclose(ours, theirs, **TOL)
  assert np.all(np.asarray(ours) != 0)


def random_policy_inputs(seed: int, time: int, num_actions: int = 5):
  rng = np.random.default_rng(seed)
  f32 = lambda x: jnp.asarray(x, jnp.float32)
  return dict(pi=f32(rng.normal(scale=2.0, size=(time, num_actions))),
              mu=f32(rng.normal(scale=2.0, size=(time, num_actions))),
              actions=jnp.asarray(rng.integers(0, num_actions, size=time), jnp.int32),
              adv=f32(rng.normal(size=time)), weights=f32(rng.random(time)))


def test_policy_functions_by_hand():
  # T=2, 2 actions: pi = [0.8, 0.2] then [0.5, 0.5]; mu uniform; actions 0 then 1.
  pi = jnp.log(jnp.array([[0.8, 0.2], [0.5, 0.5]], jnp.float32))
  mu = jnp.zeros((2, 2), jnp.float32)
  actions = jnp.array([0, 1], jnp.int32)
  ratios = rlax_standin.categorical_importance_sampling_ratios(pi, mu, actions)
  np.testing.assert_allclose(ratios, [1.6, 1.0], **TOL)
  pg = rlax_standin.policy_gradient_loss(pi, actions, jnp.array([2.0, -1.0]), jnp.array([1.0, 0.5]))
  np.testing.assert_allclose(pg, -(2.0 * np.log(0.8) - 0.5 * np.log(0.5)) / 2, **TOL)
  entropy = rlax_standin.entropy_loss(pi, jnp.ones(2))
  h0 = -(0.8 * np.log(0.8) + 0.2 * np.log(0.2))
  np.testing.assert_allclose(entropy, -(h0 + np.log(2)) / 2, **TOL)


@pytest.mark.parametrize('fn, args', [
    (rlax_standin.policy_gradient_loss, (jnp.zeros((3, 2, 4)), jnp.zeros(3, int), jnp.zeros(3),
                                         jnp.ones(3))),
    (rlax_standin.entropy_loss, (jnp.zeros((3, 4)), jnp.ones((3, 1)))),
])
def test_policy_functions_reject_wrong_ranks(fn, args):
  with pytest.raises(ValueError, match='must have rank'):
    fn(*args)


@needs_rlax
@pytest.mark.parametrize('use_jit', [True, False], ids=['jit', 'nojit'])
@pytest.mark.parametrize('time', [1, 5, 50])
@pytest.mark.parametrize('seed', [0, 1, 2])
def test_policy_functions_and_their_gradients_equal_rlax(seed, time, use_jit):
  x = random_policy_inputs(seed, time)
  maybe_jit = jax.jit if use_jit else (lambda f: f)
  for name, call in [
      ('categorical_importance_sampling_ratios', lambda m, pi: m(pi, x['mu'], x['actions'])),
      ('policy_gradient_loss', lambda m, pi: m(pi, x['actions'], x['adv'], x['weights'])),
      ('entropy_loss', lambda m, pi: m(pi, x['weights'])),
  ]:
    ours, theirs = (maybe_jit(functools.partial(call, getattr(module, name)))
                    for module in (rlax_standin, rlax_import.rlax))
    np.testing.assert_allclose(ours(x['pi']), theirs(x['pi']), err_msg=name, **TOL)
    scalar = lambda f: lambda pi: jnp.sum(jnp.sin(f(pi)))  # a non-trivial weighting of outputs
    np.testing.assert_allclose(jax.grad(scalar(ours))(x['pi']), jax.grad(scalar(theirs))(x['pi']),
                               err_msg=f'{name} gradient', **TOL)


@needs_rlax
@pytest.mark.parametrize('time', [1, 5, 50])
@pytest.mark.parametrize('seed', [0, 1])
def test_ppo_functions_equal_rlax(seed, time):
  rng = np.random.default_rng(seed)
  f32 = lambda x: jnp.asarray(x, jnp.float32)
  ratios, adv = f32(np.exp(rng.normal(scale=0.3, size=time))), f32(rng.normal(size=time))
  rewards, values = f32(rng.normal(size=time)), f32(rng.normal(size=time + 1))
  discounts = f32(0.99 * (rng.random(time) > 0.2))
  for module_a, module_b in [(rlax_standin, rlax_import.rlax)]:
    np.testing.assert_allclose(module_a.clipped_surrogate_pg_loss(ratios, adv, 0.2),
                               module_b.clipped_surrogate_pg_loss(ratios, adv, 0.2), **TOL)
    np.testing.assert_allclose(
        module_a.truncated_generalized_advantage_estimation(rewards, discounts, 0.95, values),
        module_b.truncated_generalized_advantage_estimation(rewards, discounts, 0.95, values), **TOL)
    grad = lambda m: jax.grad(lambda r: m.clipped_surrogate_pg_loss(r, adv, 0.2))(ratios)
    np.testing.assert_allclose(grad(module_a), grad(module_b), **TOL)
