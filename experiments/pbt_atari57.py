"""Multi-level S3TA with PBT on all 57 Atari games (paper 000, App. A.2; IMPALA App. F).

Usage:
  python -m launch.pbt --config=experiments/pbt_atari57.py --workdir=DIR [--config.population_size=16]

ARG: '' (default) = the paper's setup: population 16, every member's actors spread
round-robin over the 57 games (full 18-action space) feeding one learner,
evolving learning rate, entropy cost, RMSProp epsilon and gradient-clip threshold
after 2e7 frames; fitness = mean capped human-normalised score. 'atari3' = the
same on three games with a population of 4 (a small sweep).
Derived from experiments/atari_expert.py (the single-game agent).
"""

import ml_collections

from experiments import atari_expert

VARIANTS = ('', 'atari3')


def get_config(arg: str = ''):
  arg = (arg or '').strip()
  if arg not in VARIANTS:
    raise ValueError(f'Unknown pbt_atari57 variant {arg!r}; valid: {VARIANTS}.')
  config = atari_expert.get_config('')
  config.population_size = 16  # PBT members (A.2)
  config.games = 'atari57'  # multi-level: actors assigned round-robin over these games
  config.num_actors = 114  # per member: 2 actors per game
  config.fitness_window = 50  # recent episodes per game behind a member's fitness
  config.pbt_max_seconds = 0.0  # no controller time limit; learners stop at max_frames
  config.max_frames = 10_000_000_000  # per-member learner frames (multi-level runs are long)
  config.evaluator.enabled = False  # fitness comes from training episodes
  config.pbt_init_ranges = ml_collections.ConfigDict()  # log-uniform initial values (IMPALA App. F)
  config.pbt_init_ranges.learning_rate = (1e-5, 5e-3)
  config.pbt_init_ranges.entropy_cost = (5e-5, 1e-2)

  config.pbt = ml_collections.ConfigDict()  # s3ta.pbt.config.PBTConfig fields
  config.pbt.evolve = ('learning_rate', 'entropy_cost', 'rmsprop_epsilon', 'grad_clip')  # A.2
  config.pbt.exploit = 'impala'  # compare with a random member, copy if > threshold better
  config.pbt.exploit_threshold = 0.05  # 5 % absolute capped HNS
  config.pbt.truncation_fraction = 0.25  # used by exploit = 'truncation'
  config.pbt.perturb_probability = 1 / 3  # each evolved hyperparameter
  config.pbt.perturb_factor = 1.2  # x1.2 or /1.2
  config.pbt.explore_without_exploit = False  # PBT: explore after an exploit only
  config.pbt.ready_interval_frames = 10_000_000  # frames between two changes of one member
  config.pbt.burn_in_frames = 20_000_000  # A.2: 2e7 frames before evolution
  config.pbt.min_episodes = 20  # episodes (all games) before a fitness counts
  config.pbt.poll_interval_s = 60.0  # seconds between polls
  config.pbt.seed = 0  # PBT randomness

  if arg == 'atari3':
    config.population_size = 4
    config.games = 'atari3'
    config.num_actors = 12
    config.pbt.burn_in_frames = 5_000_000
    config.pbt.ready_interval_frames = 2_000_000
  return config
