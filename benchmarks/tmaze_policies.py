"""What hand-written policies earn in the T-maze (`s3ta/envs/tmaze.py`): the bar a learner must clear.

Plays each policy for `--episodes` episodes of each length in `--lengths` and prints one
JSON line per (policy, length): mean reward per episode and the fraction of episodes with
a second reward. Policies (they read the agent's position, which the 5 x 5 view shows
everywhere but the middle cell of a column):
  random      uniform over the five actions;
  navigate    down the side columns, along the bottom to the centre, up the centre, and a
              random side at the top: the loop without remembering the last reward's side;
  figure8     the same, but the side opposite the last corner reached: the optimum.
Both loop policies go down the centre first when they have not passed its bottom (a random
start there), as an agent that remembers where it came from would. `--start=random` plays
the mazes of `config.env.start='random'`, where the first reward takes longer.

  python benchmarks/tmaze_policies.py [--episodes=500] [--lengths=200,1000] [--start=centre|random]
"""

import argparse
import json

import numpy as np

from s3ta.envs import tmaze

NOOP, UP, RIGHT, DOWN, LEFT = range(5)


def loop_action(maze: tmaze.TMaze, side_at_top) -> int:
  x, y = maze.position
  if x == tmaze.CENTRE_X:
    if 0 < y and not maze.via_centre:
      return DOWN  # to the bottom first: only coming up from there counts
    return UP if y > 0 else side_at_top()
  if y == 0:  # on the top row, heading out to a corner; in a corner, down its side
    return DOWN if x in (0, tmaze.WIDTH - 1) else (LEFT if x < tmaze.CENTRE_X else RIGHT)
  if x in (0, tmaze.WIDTH - 1) and y < tmaze.HEIGHT - 1:
    return DOWN
  return RIGHT if x < tmaze.CENTRE_X else LEFT  # the bottom row, towards the centre


def play(policy: str, steps: int, rng: np.random.Generator, start: str = 'centre') -> float:
  maze, total, last_side = tmaze.TMaze(start, int(rng.integers(2**31))), 0.0, None

  def random_side():
    return int(rng.choice((LEFT, RIGHT)))

  def opposite_side():  # reads `last_side` as the loop below last set it
    return random_side() if last_side is None else (RIGHT if last_side == LEFT else LEFT)

  for _ in range(steps):
    if policy == 'random':
      action = int(rng.integers(0, 5))
    else:
      action = loop_action(maze, random_side if policy == 'navigate' else opposite_side)
    total += maze.step(action)
    if maze.position in (tmaze.LEFT_CORNER, tmaze.RIGHT_CORNER):
      last_side = LEFT if maze.position == tmaze.LEFT_CORNER else RIGHT
  return total


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--episodes', type=int, default=500)
  parser.add_argument('--lengths', default='200,1000', help='comma-separated steps per episode')
  parser.add_argument('--start', default='centre', choices=tmaze.STARTS)
  args = parser.parse_args()
  for steps in (int(s) for s in args.lengths.split(',')):
    for policy in ('random', 'navigate', 'figure8'):
      rng = np.random.default_rng(0)
      returns = np.array([play(policy, steps, rng, args.start) for _ in range(args.episodes)])
      print(json.dumps(dict(policy=policy, start=args.start, steps=steps, episodes=args.episodes,
                            mean_reward=round(float(returns.mean()), 3),
                            second_reward_fraction=round(float((returns >= 2).mean()), 4),
                            optimum=steps // tmaze.OPTIMAL_STEPS_PER_REWARD)))


if __name__ == '__main__':
  main()
