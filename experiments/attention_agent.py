"""Paper 004's AttentionAgent evolved with CMA-ES on CarRacing or VizDoom TakeCover.

Usage:
  python -m launch.evolve --config=experiments/attention_agent.py:TASK --workdir=DIR
TASK: 'take_cover' (default) or 'car_racing'. The agent and CMA-ES settings are 004's
(Table 1; population 256, initial sigma 0.1, fitness = mean return over 5 TakeCover or
16 CarRacing rollouts). `launch.evolve --launch_type=single` runs the workers as local
processes; `local_mp` runs them as Launchpad nodes. Budgets that fit a 2-core machine are
in BENCHMARKS.md (pass them as --config.x=y overrides).
"""

import ml_collections

from s3ta.envs import vision_tasks

ROLLOUTS = {'take_cover': 5, 'car_racing': 16}  # 004 section 5.2


def get_config(arg: str = 'take_cover'):
  task = (arg or 'take_cover').strip()
  if task not in vision_tasks.TASKS:
    raise ValueError(f'Unknown attention_agent task {task!r}; valid: {vision_tasks.TASKS}.')
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
  return config
