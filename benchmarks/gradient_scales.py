"""Gradient size of the IMPALA loss per parameter at initialisation, on real Pong frames.

Why: RMSProp with epsilon inside the square root (TF1's, the paper's 0.01) normalises a
parameter's step only where its gradient RMS exceeds sqrt(epsilon); below that the step is
SGD at lr / sqrt(epsilon). This prints, per parameter array, the gradient RMS and the share
of entries below sqrt(epsilon), plus how much the network's outputs vary across frames and
how far the attention is from uniform, for any network kinds on the same random-policy batch.

  python benchmarks/gradient_scales.py --batch_size=32 --unroll_length=50 --kinds=s3ta,resnet_lstm
"""

import argparse

import s3ta  # noqa: F401  pylint: disable=unused-import  (rlax before TF)

import jax
import jax.numpy as jnp
import numpy as np

from experiments import atari_expert
from s3ta.envs import factory
from s3ta.learning import LearnerConfig, Trajectory
from s3ta.learning.learner_core import trajectory_loss
from s3ta.networks import make_network
from s3ta.networks.agent import AgentInput


def random_policy_batch(env_config, batch_size: int, unroll_length: int, burn_in: int, seed: int):
  """A [T + 1, B] Trajectory of uniformly random actions after `burn_in` steps (no state)."""
  num_actions, _ = factory.env_spec(env_config)
  env = factory.make_env(env_config, batch_size, seed=seed)
  rng = np.random.default_rng(seed)
  step = env.reset()
  prev_action = np.zeros(batch_size, np.int32)
  prev_reward = np.zeros(batch_size, np.float32)
  columns = {k: [] for k in ('observation', 'prev_action', 'prev_reward', 'is_first', 'action',
                             'reward', 'discount')}
  for t in range(burn_in + unroll_length + 1):
    action = rng.integers(0, num_actions, batch_size).astype(np.int32)
    kept = t >= burn_in
    if kept:
      for name, value in (('observation', step.observation), ('prev_action', prev_action),
                          ('prev_reward', prev_reward), ('is_first', step.is_first),
                          ('action', action)):
        columns[name].append(np.asarray(value))
    step = env.step(action)
    if kept:
      columns['reward'].append(np.asarray(step.reward, np.float32))
      columns['discount'].append(np.asarray(step.discount, np.float32))
    prev_action, prev_reward = action, np.asarray(step.reward, np.float32)
  env.close()
  data = {k: jnp.asarray(np.stack(v)) for k, v in columns.items()}
  data['behaviour_logits'] = jnp.zeros((unroll_length + 1, batch_size, num_actions))  # uniform
  return data


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--kinds', default='s3ta,resnet_lstm', help='network kinds, comma-separated')
  parser.add_argument('--batch_size', type=int, default=32)
  parser.add_argument('--unroll_length', type=int, default=50)
  parser.add_argument('--burn_in', type=int, default=200, help='random steps before the unroll')
  parser.add_argument('--backend', default='ale', help="Atari backend: 'ale' or 'envpool'")
  parser.add_argument('--seed', type=int, default=0)
  args = parser.parse_args()

  config = atari_expert.get_config()  # the paper's agent and hyperparameters
  config.env.backend = args.backend
  learner_config = LearnerConfig.from_dict(config.learner)
  floor = float(np.sqrt(learner_config.rmsprop_epsilon))
  num_actions, observation_shape = factory.env_spec(config.env)
  data = random_policy_batch(config.env, args.batch_size, args.unroll_length, args.burn_in, args.seed)
  print(f'Pong, random policy, B {args.batch_size} x T {args.unroll_length}: '
        f'{int(jnp.sum(jnp.abs(data["reward"])))} points scored; RMSProp sqrt(epsilon) = {floor:g}')
  for kind in args.kinds.split(','):
    config.network.kind = kind
    network = make_network(config.network, num_actions, observation_shape)
    params = network.init(jax.random.PRNGKey(args.seed))
    batch = Trajectory(initial_state=network.initial_state(args.batch_size), **data)
    grad_fn = jax.jit(jax.grad(trajectory_loss, has_aux=True), static_argnums=(1, 2))
    grads, metrics = grad_fn(params, network, learner_config, batch,
                             jnp.float32(learner_config.entropy_cost))
    print(f'\n== {kind}: ' + ', '.join(f'{k} {float(v):.3g}' for k, v in sorted(metrics.items())))
    print(f'  {"parameter":52s} {"size":>8s} {"grad RMS":>9s} {"share < floor":>13s}')
    for path, grad in jax.tree_util.tree_flatten_with_path(grads)[0]:
      grad = np.asarray(grad)
      name = '/'.join(str(getattr(p, 'key', p)) for p in path)
      print(f'  {name:52s} {grad.size:8d} {np.sqrt(np.mean(grad**2)):9.3g} '
            f'{np.mean(np.abs(grad) < floor):13.2f}')
    inputs = AgentInput(batch.observation, batch.prev_action, batch.prev_reward, batch.is_first)
    outputs, _ = jax.jit(network.unroll)(params, inputs, batch.initial_state)
    print(f'  value std over frames {float(jnp.std(outputs.value)):.3g}, policy-logit std over frames '
          f'{float(jnp.mean(jnp.std(outputs.logits, axis=(0, 1)))):.3g}')
    if outputs.attention is not None:
      weights = np.asarray(outputs.attention)
      print(f'  attention: mean of each head\'s largest weight {weights.max(axis=(-2, -1)).mean():.3g} '
            f'(uniform: {1 / np.prod(weights.shape[-2:]):.3g})')


if __name__ == '__main__':
  main()
