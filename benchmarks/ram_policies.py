"""What hand-written policies score on RAM-feature Pong (`s3ta/envs/atari_ram.py`): the bar.

003 notes that Pong "can be played with some success (winning a majority of matches) by a
linear function, minimizing the vertical distance between ball and player". This plays
that function and a uniformly random policy on the same observations the agents get
(the newest of each feature's 4 steps, by name), whole episodes, and prints one JSON line
per policy: mean and standard deviation of the return, points won, agent steps.
  random   uniform over Pong's six actions;
  track    up when the ball is above the paddle (ball_y < player_y - dead zone), down when
           below, else no-op: the linear rule 003 describes.

  python benchmarks/ram_policies.py [--episodes=3] [--dead_zone=3]
"""

import argparse
import json
import time

import numpy as np

from s3ta.envs import atari_ram

NOOP, UP, DOWN = 0, 2, 3  # Pong's minimal action set: RIGHT moves the paddle up, LEFT down


def play(policy: str, episodes: int, dead_zone: int, seed: int) -> dict:
  env = atari_ram.RamFeatureEnv('Pong', 1, seed=seed)
  names = env.feature_names
  player_y, ball_y = names.index('player_y'), names.index('ball_y')
  rng = np.random.default_rng(seed)
  returns, points, steps = [], 0, 0
  step = env.reset()
  while len(returns) < episodes:
    total, done = 0.0, False
    while not done:
      features = step.observation[0, :, -1, 0].astype(int)
      if policy == 'random':
        action = int(rng.integers(env.num_actions))
      else:
        gap = features[ball_y] - features[player_y]
        action = UP if gap < -dead_zone else DOWN if gap > dead_zone else NOOP
      step = env.step(np.asarray([action]))
      total += float(step.reward[0])
      points += int(step.reward[0] > 0)
      steps += 1
      done = bool(step.last[0])
    returns.append(total)
    step = env.step(np.zeros(1, np.int64))  # the next episode's first step
  env.close()
  return {'policy': policy, 'episodes': episodes, 'mean_return': float(np.mean(returns)),
          'std_return': float(np.std(returns)), 'returns': returns, 'points_won': points,
          'agent_steps': steps}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--episodes', type=int, default=3)
  parser.add_argument('--dead_zone', type=int, default=3, help='pixels of gap left alone')
  parser.add_argument('--seed', type=int, default=0)
  args = parser.parse_args()
  if args.episodes < 1 or args.dead_zone < 0:
    parser.error(f'--episodes must be >= 1 and --dead_zone >= 0, got {args.episodes}, '
                 f'{args.dead_zone}.')
  for policy in ('random', 'track'):
    start = time.time()
    result = play(policy, args.episodes, args.dead_zone, args.seed)
    print(json.dumps(dict(result, seconds=round(time.time() - start, 1))), flush=True)


if __name__ == '__main__':
  main()
