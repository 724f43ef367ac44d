"""The single-machine trainer's device actor records exactly what the host loop records."""

import jax
import numpy as np
import pytest

from s3ta.acting import UnrollAccumulator, agent_input
from s3ta.acting.device_actor import DeviceActor, group_sizes, slice_batches
from s3ta.envs import factory
from s3ta.networks import AgentInput, NetworkConfig, make_network

CATCH = {'name': 'catch', 'rows': 4, 'columns': 3, 'pixel_scale': 1}
TINY = NetworkConfig(kind='s3ta', conv_channels=(4,), conv_kernels=(1,), conv_strides=(1,),
                     vision_lstm_channels=8, key_channels=2, num_heads=1, basis_frequencies=1,
                     query_hidden=(8,), answer_hidden=(8,), lstm_size=8, head_hidden=8)


class Recorder:
  """Passes an env through and keeps every EnvStep it returned and every action it got."""

  def __init__(self, env):
    self.env, self.steps, self.actions = env, [], []
    self.num_envs, self.num_actions = env.num_envs, env.num_actions
    self.observation_shape = env.observation_shape

  def reset(self):
    self.steps.append(self.env.reset())
    return self.steps[-1]

  def send(self, actions):
    self.actions.append(np.asarray(actions))
    self.env.send(actions)

  def recv(self):
    self.steps.append(self.env.recv())
    return self.steps[-1]

  def close(self):
    self.env.close()


def _host_trajectories(network, params, env: Recorder, unroll_length: int):
  """What the distributed actor would build from the same steps (UnrollAccumulator)."""
  accumulator = UnrollAccumulator(unroll_length)
  state = network.initial_state(env.num_envs)
  prev_action = np.zeros(env.num_envs, np.int32)
  out = []
  for k, action in enumerate(env.actions[:-1]):
    inputs = agent_input(env.steps[k], prev_action)
    outputs, next_state = network.step(params, AgentInput(*inputs), state)
    trajectory = accumulator.add(
        dict(observation=inputs.observation, prev_action=inputs.prev_action,
             prev_reward=inputs.prev_reward, is_first=inputs.is_first, action=action,
             behaviour_logits=np.asarray(outputs.logits), reward=env.steps[k + 1].reward,
             discount=env.steps[k + 1].discount), state)
    state, prev_action = next_state, action
    if trajectory is not None:
      out.append(trajectory)
  return out


@pytest.mark.parametrize('groups', [1, 2])
def test_device_unrolls_equal_host_unrolls(groups):
  num_envs, unroll_length = 4, 3
  network = make_network(TINY, 3, (4, 3, 3))
  params = network.init(jax.random.PRNGKey(0))
  envs = [Recorder(factory.make_env(CATCH, n, seed=10 * g))
          for g, n in enumerate(group_sizes(num_envs, groups))]
  actor = DeviceActor(envs, network, unroll_length=unroll_length, rng_key=jax.random.PRNGKey(1),
                      device=jax.devices('cpu')[0])
  device_unrolls = [actor.collect(params) for _ in range(3)]
  assert actor.env_steps == 3 * unroll_length * num_envs
  # Catch with 4 rows: episodes of 3 steps, so each 3-step unroll ends one episode per env.
  assert actor.episodes == 3 * num_envs and len(actor.finished) == num_envs
  host = [_host_trajectories(network, params, env, unroll_length) for env in envs]
  # The host loop needs the step after an unroll's last: it completes the first two.
  assert all(len(h) == 2 for h in host)
  for i, unroll in enumerate(device_unrolls[:2]):
    assert unroll.observation.shape == (unroll_length + 1, num_envs, 4, 3, 3)
    columns = 0
    for group_unrolls in host:
      expected = group_unrolls[i]
      width = expected.is_first.shape[1]
      part = jax.tree_util.tree_map(lambda x: np.asarray(x)[:, columns:columns + width],  # noqa: B023
                                    unroll._replace(initial_state=None))
      for field in ('observation', 'prev_action', 'prev_reward', 'is_first', 'action'):
        np.testing.assert_array_equal(getattr(part, field), getattr(expected, field), err_msg=field)
      np.testing.assert_allclose(part.behaviour_logits, expected.behaviour_logits, atol=1e-5)
      # The last step's reward/discount belong to the next unroll (unused by the loss).
      np.testing.assert_array_equal(part.reward[:-1], expected.reward[:-1])
      np.testing.assert_array_equal(part.discount[:-1], expected.discount[:-1])
      state = jax.tree_util.tree_map(lambda x: np.asarray(x)[columns:columns + width],  # noqa: B023
                                     unroll.initial_state)
      for got, want in zip(jax.tree_util.tree_leaves(state),
                           jax.tree_util.tree_leaves(expected.initial_state)):
        np.testing.assert_allclose(got, want, atol=1e-5)
      columns += width


def test_slice_batches_and_group_sizes():
  network = make_network(TINY, 3, (4, 3, 3))
  actor = DeviceActor([factory.make_env(CATCH, 4, seed=0)], network, unroll_length=2,
                      rng_key=jax.random.PRNGKey(0), device=jax.devices('cpu')[0])
  unroll = actor.collect(network.init(jax.random.PRNGKey(0)))
  batches = slice_batches(unroll, 2)
  assert len(batches) == 2 and batches[1].action.shape == (3, 2)
  np.testing.assert_array_equal(batches[1].observation, np.asarray(unroll.observation)[:, 2:])
  np.testing.assert_array_equal(batches[1].initial_state.core[0],
                                np.asarray(unroll.initial_state.core[0])[2:])
  with pytest.raises(ValueError, match=r'batch_size \(3\) must divide the number of environments \(4\)'):
    slice_batches(unroll, 3)
  assert group_sizes(32, 2) == [16, 16]
  with pytest.raises(ValueError, match=r'env_groups \(3\) must be >= 1 and divide'):
    group_sizes(32, 3)
