"""CarRacing step time: gymnasium's renderer against ours (`s3ta/envs/car_racing.py`), same pixels.

Steps both environments in alternation on the same random actions (one process, so
the machine's load falls on both alike), checks every frame is identical, and prints
one JSON line with milliseconds per step for each and their ratio.

  python benchmarks/car_racing_render.py [--steps=300] [--seeds=0,1]
"""

import argparse
import json
import platform
import time

import numpy as np
from gymnasium.envs.box2d import car_racing as gym_car_racing

from s3ta.envs import car_racing


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--steps', type=int, default=300, help='steps per seed')
  parser.add_argument('--seeds', default='0,1', help='comma-separated track seeds')
  args = parser.parse_args()
  envs = {'gymnasium': gym_car_racing.CarRacing(continuous=True),
          'ours': car_racing._CarRacing(continuous=True)}  # pylint: disable=protected-access
  seconds = dict.fromkeys(envs, 0.0)
  rng = np.random.default_rng(0)
  steps = differing = 0
  for seed in (int(s) for s in args.seeds.split(',')):
    for env in envs.values():
      env.reset(seed=seed)
    for _ in range(args.steps):
      action = rng.uniform([-1.0, 0.0, 0.0], [1.0, 1.0, 0.2]).astype(np.float32)
      frames = []
      for name, env in envs.items():
        start = time.perf_counter()
        frames.append(env.step(action)[0])
        seconds[name] += time.perf_counter() - start
      differing += int(not np.array_equal(*frames))
      steps += 1
  for env in envs.values():
    env.close()
  ms = {name: round(1e3 * s / steps, 2) for name, s in seconds.items()}
  print(json.dumps(dict(
      steps=steps, frames_differing=differing, ms_per_step=ms,
      speedup=round(seconds['gymnasium'] / seconds['ours'], 2),
      machine=f'{platform.node()} ({platform.processor() or platform.machine()})')))


if __name__ == '__main__':
  main()
