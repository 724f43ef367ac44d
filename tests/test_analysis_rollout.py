"""The analysis agent runner on real EnvPool Pong with a small S3TA network.

Checks the things the analysis relies on: keys re-derived from the ConvLSTM state
reproduce the network's attention (so what/where maps decompose the real logits),
hard attention at t = 0 is exactly soft attention and at t = 1 keeps only the
arg-max location, perturbed frames are evaluated from the same recurrent state,
and checkpoints round-trip (or fail with a clear error).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from s3ta.analysis import numerics, rollout
from s3ta.learning import learner_core
from s3ta.networks import AgentInput, NetworkConfig, make_network
from s3ta.utils import checkpoint as checkpoint_lib


@pytest.fixture(scope='module')
def runner_and_records():
  env = rollout.make_env('Pong', num_envs=1, seed=3)
  agent = rollout.load_agent(None, env.num_actions, 'small', seed=1)
  runner = rollout.AgentRunner(agent, env, seed=0)
  records = rollout.play(runner, 6, 'test')
  yield runner, records
  runner.close()


def test_records_and_keys_reproduce_attention(runner_and_records):
  runner, records = runner_and_records
  cfg = runner.config
  assert len(records) == 6 and records[0].is_first and not records[1].is_first
  basis = runner.basis
  for record in records:
    assert record.frame.shape == (210, 160, 3) and record.frame.dtype == np.uint8
    assert record.attention.shape == (cfg.num_heads, 27, 20)
    assert record.keys.shape == (27, 20, cfg.key_channels)
    ww = numerics.what_where(record.queries, record.keys, basis, record.attention)
    logits = (ww.what + ww.where).reshape(cfg.num_heads, -1)
    soft = np.exp(logits - logits.max(-1, keepdims=True))
    soft /= soft.sum(-1, keepdims=True)
    np.testing.assert_allclose(soft.reshape(record.attention.shape), record.attention, atol=1e-6)


def test_evaluate_frames_uses_the_same_recurrent_state(runner_and_records):
  runner, _ = runner_and_records
  frame = runner.env_step.observation
  noise = np.random.default_rng(0).integers(0, 256, size=(3,) + frame.shape[1:], dtype=np.uint8)
  logits, values = runner.evaluate_frames(np.concatenate([frame, noise]), batch_size=8)
  assert logits.shape == (4, runner.network.num_actions) and values.shape == (4,)
  record, _ = runner.step()  # now the agent really processes `frame` from that state
  np.testing.assert_allclose(logits[0], record.logits, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(values[0], record.value, rtol=1e-5, atol=1e-6)
  assert not np.allclose(values[1:], record.value)  # other frames give other answers


def test_hard_attention_threshold_zero_is_soft_and_one_is_argmax(runner_and_records):
  runner, records = runner_and_records
  network, params = runner.network, runner.agent.params
  step = jax.jit(network.step)

  def inputs(t, is_first):
    return AgentInput(records[t].frame[None], jnp.zeros((1,), jnp.int32), jnp.zeros((1,)),
                      jnp.array([is_first]))

  # Step 0 from zero state (its queries come from a zero LSTM state), then compare at step 1.
  _, state = step(params, inputs(0, True), network.initial_state(1), 0.0)
  soft, _ = jax.jit(lambda p, i, s: network.step(p, i, s))(params, inputs(1, False), state)
  at_zero, _ = step(params, inputs(1, False), state, 0.0)
  for a, b in zip(jax.tree_util.tree_leaves(soft), jax.tree_util.tree_leaves(at_zero)):
    np.testing.assert_array_equal(a, b)
  hard, _ = step(params, inputs(1, False), state, 1.0)
  heads = network.config.num_heads
  soft_w = np.asarray(soft.attention[0]).reshape(heads, -1)
  hard_w = np.asarray(hard.attention[0]).reshape(heads, -1)
  assert np.all(soft_w.max(-1) > np.sort(soft_w, -1)[:, -2])  # a unique arg-max per head
  np.testing.assert_array_equal(hard_w.argmax(-1), soft_w.argmax(-1))
  np.testing.assert_allclose(hard_w.max(-1), 1.0, rtol=1e-6)
  np.testing.assert_allclose(hard_w.sum(-1), 1.0, rtol=1e-6)
  # ... and the hard answer changes the policy's inputs, so the outputs differ.
  assert not np.allclose(hard.logits, soft.logits)


def _save_training_state(directory, config, num_actions):
  network = make_network(config, num_actions, rollout.ATARI_OBSERVATION_SHAPE)
  params = rollout.random_params(network, seed=5)
  state = learner_core.TrainingState(params, learner_core.make_optimizer(learner_core.LearnerConfig()).init(params),
                                     jnp.float32(0.01), jnp.int32(7))
  checkpoint_lib.save(checkpoint_lib.checkpoint_dir(directory), 7, state, network_config=config)
  return params


def test_checkpoint_round_trip_and_mismatch(tmp_path):
  config = NetworkConfig(**rollout.SMALL_NETWORK)
  params = _save_training_state(str(tmp_path / 'run'), config, num_actions=6)
  agent = rollout.load_agent(str(tmp_path / 'run'), 6)  # a workdir with checkpoints/
  assert agent.network.config == config and 'step 7' in agent.description
  for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(agent.params)):
    np.testing.assert_array_equal(a, b)
  with pytest.raises(ValueError, match='does not fit'):
    rollout.load_agent(str(tmp_path / 'run'), 4)  # another game's action count
  with pytest.raises(FileNotFoundError, match='does not exist'):
    rollout.load_agent(str(tmp_path / 'missing'), 6)
  (tmp_path / 'empty').mkdir()
  with pytest.raises(FileNotFoundError, match='no checkpoint'):
    rollout.load_agent(str(tmp_path / 'empty'), 6)


def test_a_checkpointed_value_offset_is_added_to_the_values_shown(tmp_path):
  # A run with `learner.value_offset_step_size` keeps part of its value in the training state:
  # the analysis must show the value the learner used (network output + offset).
  config = NetworkConfig(**rollout.SMALL_NETWORK)
  network = make_network(config, 6, rollout.ATARI_OBSERVATION_SHAPE)
  params = rollout.random_params(network, seed=5)
  learner = learner_core.LearnerConfig(value_offset_step_size=0.1)
  state = learner_core.TrainingState(params, learner_core.make_optimizer(learner).init(params),
                                     jnp.float32(0.01), jnp.int32(7), jnp.float32(-2.5))
  checkpoint_lib.save(checkpoint_lib.checkpoint_dir(str(tmp_path)), 7, state, network_config=config,
                      config={'learner': {'value_offset_step_size': 0.1}})
  agent = rollout.load_agent(str(tmp_path), 6)
  assert agent.value_offset == -2.5
  values = {}
  for offset in (-2.5, 0.0):
    env = rollout.make_env('Pong', num_envs=1, seed=3)
    runner = rollout.AgentRunner(dataclasses.replace(agent, value_offset=offset), env, seed=0)
    values[offset] = [record.value for record in rollout.play(runner, 3, 'test')]
    runner.close()
  np.testing.assert_allclose(np.subtract(values[-2.5], values[0.0]), -2.5, rtol=1e-5)
