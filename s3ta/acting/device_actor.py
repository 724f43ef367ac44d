"""Acting for the single-machine trainer: CPU environments, policy and unrolls on one device.

The Cleanba / SEED RL pattern. `DeviceActor` steps G environment groups in turn:
while group g's policy runs (one jitted call for the whole group on the learner's
device), the emulators of the other groups run on their own CPU threads
(`send`/`recv`). Recurrent state, the previous action and every recorded step stay
on the device; only frames, rewards and flags go up and only actions come down.
After T steps per group, one jitted call stacks the recorded steps into a
`Trajectory` [T + 1, N] on the device, ready for `sgd_step`.

Unrolls overlap by one step as everywhere else (s3ta/acting/unroll.py): the last
step of an unroll is the first of the next, with the recurrent state before it.
The last step's `reward`/`discount` belong to the transition after the unroll and
are not used by the loss (which reads `[:-1]`); they are zeros here.
"""

import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from s3ta.acting.actor_core import agent_input, make_select_action
from s3ta.envs.base import EnvStep, EpisodeTracker
from s3ta.types import Trajectory

RECORD_FIELDS = ('observation', 'prev_action', 'prev_reward', 'is_first', 'action',
                 'behaviour_logits', 'env_reward', 'env_discount')


class _Group:
  """One environment batch and its device-side acting state."""

  def __init__(self, env, network, rng_key, device):
    self.env = env
    self.rng = jax.device_put(rng_key, device)
    self.state = jax.device_put(network.initial_state(env.num_envs), device)
    self.prev_action = jax.device_put(np.zeros(env.num_envs, np.int32), device)
    self.records: list[dict] = []  # steps of the current unroll (device arrays)
    self.initial_state: Any = None  # recurrent state before the unroll's first step
    self.last_state_before: Any = None  # recurrent state before the newest recorded step
    self.tracker = EpisodeTracker(env.num_envs)


def _act(select_action, params, rng, env_step: EnvStep, prev_action, state):
  """One policy step for a group: (action, next rng, next state, the step's record)."""
  rng, key = jax.random.split(rng)
  inputs = agent_input(env_step, prev_action)
  out, next_state = select_action(params, key, inputs, state)
  record = dict(observation=inputs.observation, prev_action=inputs.prev_action,
                prev_reward=inputs.prev_reward, is_first=inputs.is_first, action=out.action,
                behaviour_logits=out.logits, env_reward=env_step.reward,
                env_discount=env_step.discount)
  return out.action, rng, next_state, record


def _assemble(groups_records: list[list[dict]], initial_states: list) -> Trajectory:
  """Stacks each group's T + 1 records and joins the groups along the batch axis."""
  parts = []
  for records, initial_state in zip(groups_records, initial_states):
    stacked = {k: jnp.stack([r[k] for r in records]) for k in RECORD_FIELDS}
    # Record t's reward/discount arrived with step t + 1; the last one's is not known yet.
    after = lambda x: jnp.concatenate([x[1:], jnp.zeros_like(x[:1])])  # noqa: E731
    parts.append(Trajectory(
        observation=stacked['observation'], prev_action=stacked['prev_action'],
        prev_reward=stacked['prev_reward'], is_first=stacked['is_first'],
        action=stacked['action'], behaviour_logits=stacked['behaviour_logits'],
        reward=after(stacked['env_reward']), discount=after(stacked['env_discount']),
        initial_state=initial_state))
  if len(parts) == 1:
    return parts[0]
  steps = Trajectory(*[jnp.concatenate(xs, axis=1) for xs in zip(*[p[:-1] for p in parts])],
                     initial_state=None)
  state = jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs, axis=0),
                                 *[p.initial_state for p in parts])
  return steps._replace(initial_state=state)


class DeviceActor:
  """Acts in `envs` (G batched environments) with the policy on `device`.

  Args:
    envs: G batched environments with `send`/`recv` (s3ta/envs/factory.py); their
      env counts may differ.
    network: the agent `Network`.
    unroll_length: T.
    rng_key: PRNG key of action sampling (one per group is split from it).
    device: the jax device of the policy, the recurrent state and the unrolls.
  """

  def __init__(self, envs: list, network, *, unroll_length: int, rng_key, device):
    if unroll_length < 1:
      raise ValueError(f'unroll_length must be >= 1, got {unroll_length}.')
    if not envs:
      raise ValueError('DeviceActor needs at least one environment group.')
    self._network, self._unroll_length, self._device = network, unroll_length, device
    keys = jax.random.split(jnp.asarray(rng_key, jnp.uint32), len(envs))
    self._groups = [_Group(env, network, key, device) for env, key in zip(envs, keys)]
    select_action = make_select_action(network, jit=False)
    self._act = jax.jit(lambda *args: _act(select_action, *args))
    self._assemble = jax.jit(_assemble)
    self.num_envs = sum(env.num_envs for env in envs)
    self.env_steps = 0  # agent steps over all environments
    self.episodes = 0  # episodes finished so far
    self.finished: list[float] = []  # returns of the episodes finished in the last `collect`
    self.timers = dict(env_s=0.0, inference_s=0.0, assemble_s=0.0)
    self._started = False

  def _step(self, group: _Group, params, env_step: EnvStep) -> None:
    """Acts on `env_step` (host arrays), records it on the device, sends the actions."""
    t0 = time.perf_counter()
    env_step = jax.device_put(env_step, self._device)
    state_before = group.state
    action, group.rng, group.state, record = self._act(params, group.rng, env_step,
                                                       group.prev_action, group.state)
    group.prev_action = action
    actions = np.asarray(action)  # the one device -> host transfer of a step
    t1 = time.perf_counter()
    group.env.send(actions)
    self.timers['inference_s'] += t1 - t0
    self.timers['env_s'] += time.perf_counter() - t1
    if not group.records:
      group.initial_state = state_before
    group.records.append(record)
    group.last_state_before = state_before

  def start(self, params) -> None:
    """Resets every group and acts on the first observations with `params`."""
    for group in self._groups:
      t0 = time.perf_counter()
      env_step = group.env.reset()
      self.timers['env_s'] += time.perf_counter() - t0
      group.tracker.update(env_step)
      self._step(group, params, env_step)
    self._started = True

  def collect(self, params) -> Trajectory:
    """T more steps of every group with `params`; returns the [T + 1, N] unroll on the device."""
    if not self._started:
      self.start(params)
    self.finished = []
    for _ in range(self._unroll_length):
      for group in self._groups:
        t0 = time.perf_counter()
        env_step = group.env.recv()
        self.timers['env_s'] += time.perf_counter() - t0
        self.finished += [r for r, _ in group.tracker.update(env_step)]
        self.env_steps += group.env.num_envs
        self._step(group, params, env_step)
    t0 = time.perf_counter()
    trajectory = self._assemble([g.records for g in self._groups],
                                [g.initial_state for g in self._groups])
    self.timers['assemble_s'] += time.perf_counter() - t0
    for group in self._groups:  # the last step starts the next unroll
      group.records = group.records[-1:]
      group.initial_state = group.last_state_before
    self.episodes += len(self.finished)
    return trajectory

  def close(self) -> None:
    for group in self._groups:
      group.env.close()


def group_sizes(num_envs: int, num_groups: int) -> list[int]:
  """Environment counts of `num_groups` groups sharing `num_envs` (ValueError unless even)."""
  if num_groups < 1 or num_envs < num_groups or num_envs % num_groups:
    raise ValueError(f'single_machine.env_groups ({num_groups}) must be >= 1 and divide the '
                     f'number of environments ({num_envs}).')
  return [num_envs // num_groups] * num_groups


def slice_batches(trajectory: Trajectory, batch_size: int) -> list[Trajectory]:
  """Splits a [T + 1, N] unroll into N / batch_size learner batches [T + 1, batch_size]."""
  num_envs = trajectory.is_first.shape[1]
  if num_envs % batch_size:
    raise ValueError(f'batch_size ({batch_size}) must divide the number of environments '
                     f'({num_envs}).')
  if num_envs == batch_size:
    return [trajectory]  # no device copies on the learner's path
  batches = []
  for start in range(0, num_envs, batch_size):
    columns = slice(start, start + batch_size)
    steps = [x[:, columns] for x in trajectory[:-1]]
    state = jax.tree_util.tree_map(lambda x: x[columns], trajectory.initial_state)  # noqa: B023
    batches.append(Trajectory(*steps, initial_state=state))
  return batches
