"""Paper 004's AttentionAgent evolved with CMA-ES on CarRacing or VizDoom TakeCover.

Usage:
  python -m launch.evolve --config=experiments/attention_agent.py:TASK[,RECIPE] --workdir=DIR
TASK: 'take_cover' (default) or 'car_racing'. The agent and CMA-ES settings are 004's
(Table 1; population 256, initial sigma 0.1, fitness = mean return over 5 TakeCover or
16 CarRacing rollouts). RECIPE 'paper' (default) keeps them; 'take_cover,2core' is the
budget that solves TakeCover on a 2-core machine in 3 hours of evolution (sep-CMA-ES,
population 96 x 1 rollout in mirrored pairs: 866 on 004's test seeds 0-99, BENCHMARKS.md).
`launch.evolve --launch_type=single` runs the workers as local processes; `local_mp` runs
them as Launchpad nodes.
"""

import ml_collections

from s3ta.envs import vision_tasks

ROLLOUTS = {'take_cover': 5, 'car_racing': 16}  # 004 section 5.2

# Measured budgets other than 004's, by (task, recipe): the config fields they change.
RECIPES = {
    ('take_cover', '2core'): {  # BENCHMARKS.md: "96 x 1 in mirrored pairs, resumed to 3 hours"
        'es.population_size': 96, 'es.rollouts_per_candidate': 1, 'es.diagonal': True,
        'es.mirrored': True, 'evaluator.every_generations': 5},
}


def get_config(arg: str = 'take_cover'):
  parts = [p.strip() for p in (arg or 'take_cover').split(',')]
  task, recipe = parts[0] or 'take_cover', parts[1] if len(parts) > 1 else 'paper'
  if task not in vision_tasks.TASKS:
    raise ValueError(f'Unknown attention_agent task {task!r}; valid: {vision_tasks.TASKS}.')
  if len(parts) > 2 or (recipe != 'paper' and (task, recipe) not in RECIPES):
    valid = tuple(f'{t},paper' for t in vision_tasks.TASKS) + tuple(f'{t},{r}' for t, r in RECIPES)
    raise ValueError(f'Unknown attention_agent recipe {arg!r}; valid: TASK or one of {valid}.')
  config = ml_collections.ConfigDict()
  config.task = ml_collections.ConfigDict(dict(
      name=task,
      modification='none',  # training environment; see vision_tasks.MODIFICATIONS
      max_steps=0,  # 0: the task's own (TakeCover 2100, CarRacing 1000)
      # CarRacing training: end an episode after this many reward-less steps in a row (0: never)
      negative_reward_patience=0,
  ))
  config.agent = ml_collections.ConfigDict(dict(  # 004 Table 1
      image_size=96, patch_size=7, stride=4, channels=3, key_size=4, top_k=10, lstm_size=16))
  config.es = ml_collections.ConfigDict(dict(
      population_size=256,
      init_sigma=0.1,
      rollouts_per_candidate=ROLLOUTS[task],
      diagonal=False,  # True: separable CMA-ES (pycma's CMA_diagonal), cheaper per generation
      # step-size rule: 'pycma' (pycma 4.x's choice: TPA from 300 dimensions on, so TPA for
      # this agent), 'csa' (cumulative, what 004's pycma most likely used) or 'tpa'
      sigma_adaptation='pycma',
      # True: candidates in mirrored pairs m +- sigma z that play the same seeds (antithetic
      # sampling; pycma's unconditional mirroring); 004 does not mirror
      mirrored=False,
      # seed of the starting mean (Flax's initialisation of the agent); -1: config.seed, which
      # also seeds the sampling and the training episodes
      init_seed=-1,
  ))
  config.evaluator = ml_collections.ConfigDict(dict(
      every_generations=10,  # 0: only at the end
      rollouts=16,  # episodes of the distribution's mean per evaluation (004 tests on 100)
      # 'fresh': new seeds each evaluation (independent estimates); 'fixed': the same
      # seeds every time (runs before 2026-11-26 used these; see controller.py).
      seeds='fresh',
  ))
  config.seed = 0
  config.num_workers = 2  # rollout worker processes / nodes
  config.envs_per_worker = 4  # environments each worker steps in lockstep
  config.unit_timeout_s = 3600.0  # a worker silent this long on one unit is counted dead
  config.max_generations = 10_000
  config.max_seconds = 3 * 3600.0  # of evolution, summed over resumes
  config.checkpoint_minutes = 10.0
  config.update_from_flattened_dict(RECIPES.get((task, recipe), {}))
  return config
