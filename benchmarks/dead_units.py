"""Which layers of a trained agent have gone dead: units never positive (relu) or saturated (tanh).

Rebuilds the run's environment from its newest checkpoint, plays `--steps` random-action
steps in 8 environments, runs the agent's torso on those observations with Flax's
`capture_intermediates`, and prints per layer output the fraction of units positive on
any observation, the fraction of (unit, observation) pairs positive, and the fraction of
pairs saturated for a tanh (|x| > 2.65, where tanh'(x) < 0.02), and the share of the layer's
mean square that varies with the observation (summed variance over observations / summed mean
square; 0 for an output that ignores its input). Under a ReLU a unit never
positive is dead: no output, no gradient. (On the T-maze every relu attention agent ended
with all its token units dead; BENCHMARKS.md.) Outputs are the layers' pre-activations.

  python benchmarks/dead_units.py WORKDIR [WORKDIR ...] [--steps=150]
"""

import argparse

import jax
import numpy as np

from s3ta.analysis.rollout import restore_agent, trained_env_config
from s3ta.envs import factory
from s3ta.networks import AgentInput

NUM_ENVS = 8
SATURATED = 2.65  # |x| beyond which tanh'(x) = 1 - tanh(x)^2 < 0.02


def random_play(workdir: str, steps: int):
  """(agent from the newest checkpoint, observations of `steps` random actions in 8 envs)."""
  env = factory.make_env(trained_env_config(f'{workdir}/checkpoints'), NUM_ENVS, 0)
  agent = restore_agent(f'{workdir}/checkpoints', env.num_actions, env.observation_shape)
  rng, observations, env_step = np.random.default_rng(0), [], env.reset()
  for _ in range(steps):
    observations.append(env_step.observation)
    env_step = env.step(rng.integers(env.num_actions, size=NUM_ENVS))
  env.close()
  return agent, np.concatenate(observations)


def layer_activity(agent, frames: np.ndarray) -> list[tuple[str, tuple, float, float, float, float]]:
  """Per torso layer on `frames` [N, ...]: (layer output, shape, fraction of units ever > 0,
  of (unit, observation) pairs > 0, of pairs saturated, share of the mean square that varies
  with the observation)."""
  n = len(frames)
  inputs = AgentInput(frames[None], np.zeros((1, n), np.int32), np.zeros((1, n), np.float32),
                      np.zeros((1, n), bool))
  _, captured = agent.network.module.apply({'params': agent.params}, inputs,
                                           agent.network.initial_state(n),
                                           capture_intermediates=True, mutable=['intermediates'])
  rows = []
  for path, output in jax.tree_util.tree_flatten_with_path(captured['intermediates'])[0]:
    name = '/'.join(str(getattr(p, 'key', getattr(p, 'idx', p))) for p in path)
    output = np.asarray(output)
    if not name.startswith('torso/') or output.shape[0] != n or output.shape[-1] < 4:
      continue  # the heads' outputs and anything not per observation
    flat = output.reshape(n, -1).astype(np.float64)
    positive = flat > 0
    mean_square = float((flat ** 2).mean(0).sum())
    varying = float(flat.var(0).sum()) / mean_square if mean_square else 0.0
    rows.append((name, output.shape, float(positive.any(0).mean()), float(positive.mean()),
                 float((np.abs(output) > SATURATED).mean()), varying))
  return rows


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('workdirs', nargs='+')
  parser.add_argument('--steps', type=int, default=150, help='random-action steps per environment')
  args = parser.parse_args()
  for workdir in args.workdirs:
    print(f'== {workdir}')
    for name, shape, ever, pairs, saturated, varying in layer_activity(
        *random_play(workdir, args.steps)):
      print(f'  {name:50s} {str(shape):18s} units ever > 0: {ever:.3f}   pairs > 0: {pairs:.3f}'
            f'   pairs |x| > {SATURATED}: {saturated:.3f}   varying: {varying:.3f}')


if __name__ == '__main__':
  main()
