"""PBT smoke run: 2 members, multi-level (Breakout + Pong), tiny S3TA; minutes on 2 CPU cores.

Usage:
  python -m launch.pbt --config=experiments/pbt_smoke.py --workdir=/tmp/s3ta_pbt_smoke
  python -m s3ta.pbt.report --workdir=/tmp/s3ta_pbt_smoke

Derived from experiments/smoke.py (the single-agent smoke config) plus the PBT
fields below. Short episodes, burn-in and ready interval so that exploit and
explore events happen within the run. ARG: '' (default) or 'test' (shorter, for
tests/test_pbt_distributed.py).
"""

import ml_collections

from experiments import smoke


def get_config(arg: str = ''):
  arg = (arg or '').strip()
  if arg not in ('', 'test'):
    raise ValueError(f"Unknown pbt_smoke variant {arg!r}; valid: ('', 'test').")
  config = smoke.get_config('')
  config.population_size = 2  # PBT members (each: Reverb queue + learner + actors)
  config.games = 'atari2'  # multi-level over Breakout and Pong ('' = single game config.env.game)
  config.fitness_window = 20  # recent episodes per game behind a member's fitness
  config.pbt_max_seconds = 130.0  # controller asks learners to finish, then stops the program (0: never)
  config.pbt_init_ranges = ml_collections.ConfigDict()  # name -> (low, high): log-uniform start values
  config.pbt_init_ranges.learning_rate = (3e-4, 1e-3)  # members start with different learning rates

  config.pbt = ml_collections.ConfigDict()  # s3ta.pbt.config.PBTConfig fields (population size above)
  config.pbt.evolve = ('learning_rate', 'entropy_cost', 'rmsprop_epsilon', 'grad_clip')  # all four
  config.pbt.exploit = 'truncation'  # bottom member copies the top one (with 2 members: worse <- better)
  config.pbt.exploit_threshold = 0.0  # copy whenever the donor is strictly fitter
  config.pbt.truncation_fraction = 0.25  # bottom / top quarter (at least one member each)
  config.pbt.perturb_probability = 1 / 3  # IMPALA: each hyperparameter with p = 1/3
  config.pbt.perturb_factor = 1.2  # by x1.2 or /1.2
  config.pbt.explore_without_exploit = True  # members that keep their weights explore too
  config.pbt.ready_interval_frames = 8_000  # learner frames between two changes of a member
  config.pbt.burn_in_frames = 8_000  # learner frames before the first change
  config.pbt.min_episodes = 1  # one finished episode gives a fitness
  config.pbt.poll_interval_s = 5.0  # seconds between polls
  config.pbt.seed = 0  # PBT randomness

  config.env.max_episode_steps = 200  # truncate episodes at 800 frames: fitness arrives quickly
  config.env.num_envs = 4  # environments per actor
  config.num_actors = 2  # per member: one Breakout actor, one Pong actor
  config.evaluator.enabled = False  # fitness comes from training episodes
  config.max_frames = 0  # learners stop on time, not frames
  config.max_seconds = 150.0  # learner wall-time cap (after its start-up); the first to stop ends the run
  config.checkpoint_minutes = 1.0  # member checkpoints (plus one at stop)
  config.log_period_s = 3.0  # actors report finished episodes to their learner this often
  config.param_timeout_s = 10.0  # courier timeout (get_state / set_state included)

  if arg == 'test':  # tests/test_pbt_distributed.py: fewer processes, faster readiness
    config.games = ''  # single game ...
    config.env.game = 'Breakout'  # ... with short random episodes
    config.num_actors = 1  # per member
    config.env.max_episode_steps = 100  # 400-frame episodes
    config.pbt.ready_interval_frames = 400  # a few learner steps
    config.pbt.burn_in_frames = 400
    config.pbt.poll_interval_s = 3.0
    config.max_seconds = 170.0  # the probe node stops the program much earlier
    config.pbt_max_seconds = 180.0
    config.log_period_s = 2.0
  return config
