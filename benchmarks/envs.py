"""Atari environment throughput per backend: random-policy frames/s of the batched env.

Steps `--num_envs` environments of one game with uniformly random actions through
`s3ta.envs.factory.make_env` (the path both trainers use), for each backend in turn
within one run, and prints one JSON line per backend. Frames count emulator frames
(agent steps x action repeat 4).

  python benchmarks/envs.py [--game=Pong] [--num_envs=16] [--num_threads=2] [--seconds=20] \
      [--light] [--backends=envpool,ale]
"""

import argparse
import json
import platform
import time

import ml_collections
import numpy as np

from s3ta.envs import factory


def measure(backend: str, args) -> dict:
  """Steps the batch for `args.seconds` after 50 warm-up steps; returns the figures."""
  env_config = ml_collections.ConfigDict(dict(
      name='atari', backend=backend, game=args.game, light_observation=args.light,
      num_threads=args.num_threads))
  env = factory.make_env(env_config, args.num_envs, seed=0)
  num_actions, _ = factory.env_spec(env_config)
  rng = np.random.default_rng(0)
  env.reset()
  for _ in range(50):
    env.step(rng.integers(0, num_actions, args.num_envs).astype(np.int32))
  steps, start = 0, time.perf_counter()
  while time.perf_counter() - start < args.seconds:
    env.step(rng.integers(0, num_actions, args.num_envs).astype(np.int32))
    steps += 1
  elapsed = time.perf_counter() - start
  env.close()
  frames = steps * args.num_envs * factory.frames_per_step(env_config)
  return dict(backend=backend, game=args.game, num_envs=args.num_envs,
              num_threads=args.num_threads, light_observation=args.light,
              frames_per_s=round(frames / elapsed, 1), seconds=round(elapsed, 1))


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--game', default='Pong')
  parser.add_argument('--num_envs', type=int, default=16)
  parser.add_argument('--num_threads', type=int, default=2)
  parser.add_argument('--seconds', type=float, default=20.0)
  parser.add_argument('--light', action='store_true', help='gray 84x84 instead of RGB 210x160')
  parser.add_argument('--backends', default=','.join(factory.atari.BACKENDS))
  args = parser.parse_args()
  for backend in args.backends.split(','):
    result = measure(backend, args)
    result['machine'] = f'{platform.node()} ({platform.processor() or platform.machine()})'
    print(json.dumps(result), flush=True)


if __name__ == '__main__':
  main()
