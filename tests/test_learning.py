"""A small S3TA agent learns Catch in the single-machine trainer and stays learned (fixed seed).

Learned: the running mean of the last 500 training returns is >= 0.9. The test asserts
that it is learned by the middle of the run and stays learned for all of the second
half (a run at least twice as long as the time to learn), and that the final
parameters score >= 0.9 on 200 fresh episodes.
"""

import collections

import pytest

from experiments import catch
from launch.train_single import train
from s3ta.acting.evaluator import play_episodes
from s3ta.envs import factory

WINDOW = 500  # training episodes behind each running mean (noise ~0.01 at a 99 % catch rate)
# Each machine repeats its own trajectory exactly, but trajectories differ between machines.
# With key_norm, lr 2e-3 held to 50 K and annealed to 0 at 300 K (400 K steps in all), seed 0
# (the config's) was last below 0.9 at 77 K, 123 K to spare; seeds 0-7 all pass, the slowest
# (3) with 20 K to spare (BENCHMARKS.md, "what makes S3TA's attention start", per seed).
SEED = 0


@pytest.mark.learning
def test_s3ta_learns_catch_and_stays_learned(tmp_path):
  config = catch.get_config('s3ta')
  config.seed = SEED
  config.evaluator.enabled = False  # the test evaluates the final parameters itself
  recent = collections.deque(maxlen=WINDOW)
  means = []  # (agent steps, running mean of the last WINDOW training returns)

  def on_episodes(steps, returns):
    recent.extend(returns)
    if len(recent) == WINDOW:
      means.append((steps, sum(recent) / WINDOW))

  lines = []
  result = train(config, str(tmp_path), log=lines.append, on_episodes=on_episodes)
  log = '\n'.join(lines + [f'{s} {m:.3f}' for s, m in means[::20]])
  assert result.reason == 'max_frames', log
  assert max(mean for _, mean in means) >= 0.9, log
  # The last time the running mean was below 0.9 (it wobbles around 0.9 while it climbs)
  # lies in the first half of the run: from the middle to the end it never drops below.
  last_below = max((steps for steps, mean in means if mean < 0.9), default=0)
  assert last_below <= result.env_steps / 2, log
  env = factory.make_env(config.env, 32, seed=12345)
  returns, _ = play_episodes(result.network, result.params, env, 200, rng_key=[0, 7])
  assert sum(returns) / len(returns) >= 0.9, log
