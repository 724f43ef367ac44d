"""A small S3TA agent learns Catch in the single-machine trainer and stays learned (fixed seed).

Learned: the running mean of the last 500 training returns is >= 0.9. The test asserts
that it is learned by the middle of the run and stays learned for all of the second
half (a run at least twice as long as the time to learn).

The config anneals the learning rate to 0 at 300 K of its 400 K agent steps. From there an
update cannot change the policy, so the test trains to that point and plays the last 100 K
steps with the final parameters on fresh environments (sampling actions, as the trainer's
actors do) instead of computing a quarter of the run's updates at a learning rate of 0.
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
  config.evaluator.enabled = False  # the test plays the final parameters itself
  run_steps = config.max_frames  # agent steps of the whole run (Catch: one frame per step)
  steps_per_update = config.unroll_length * config.batch_size
  learning_rate_zero_at = (config.learner.learning_rate_decay_begin +
                           config.learner.learning_rate_decay_steps) * steps_per_update
  assert learning_rate_zero_at <= run_steps - 50_000  # the frozen part is worth skipping
  config.max_frames = learning_rate_zero_at
  recent = collections.deque(maxlen=WINDOW)
  means = []  # (agent steps, running mean of the last WINDOW training returns)

  def on_episodes(steps, returns):
    recent.extend(returns)
    if len(recent) == WINDOW:
      means.append((steps, sum(recent) / WINDOW))

  lines = []
  result = train(config, str(tmp_path), log=lines.append, on_episodes=on_episodes)
  assert result.reason == 'max_frames' and result.env_steps >= learning_rate_zero_at, lines[-20:]
  # The rest of the run, at a learning rate of 0: the final parameters, fresh environments.
  episode_steps = config.env.rows - 1  # every Catch episode
  env = factory.make_env(config.env, 32, seed=12345)
  frozen, _ = play_episodes(result.network, result.params, env,
                            (run_steps - result.env_steps) // episode_steps, rng_key=[0, 7])
  for i, episode_return in enumerate(frozen):
    on_episodes(result.env_steps + (i + 1) * episode_steps, [episode_return])
  log = '\n'.join(lines + [f'{s} {m:.3f}' for s, m in means[::20]])
  assert means[-1][0] > run_steps - episode_steps, log
  assert max(mean for _, mean in means) >= 0.9, log
  # The last time the running mean was below 0.9 (it wobbles around 0.9 while it climbs)
  # lies in the first half of the run: from the middle to the end it never drops below.
  last_below = max((steps for steps, mean in means if mean < 0.9), default=0)
  assert last_below <= run_steps / 2, log
  assert sum(frozen) / len(frozen) >= 0.9, log
