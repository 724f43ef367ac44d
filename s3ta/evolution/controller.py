"""The evolution controller: ask CMA-ES for a generation, score it on the workers, tell, record, save.

One generation: `population_size` candidates, each scored by its mean return over
`rollouts_per_candidate` episodes (004: 16 for CarRacing, 5 for TakeCover). Every
candidate of a generation plays the same episode seeds (common random numbers, so
candidates are compared on equal terms), and the seeds change every generation.
Every `evaluator.every_generations` generations and at the end, the distribution's
mean (the agent 004 reports) plays `evaluator.rollouts` episodes on seeds never used
in training: new ones at every evaluation (`evaluator.seeds = 'fresh'`), so each is an
independent estimate, or the same ones every time (`'fixed'`), so successive evaluations
differ only by the agent — but a fixed sample can be kinder than the test episodes, and
every evaluation then shares its bias (TakeCover: 16 fixed seeds scored one agent 754,
seeds 0-99 671; BENCHMARKS.md).

The workdir is laid out like the RL trainers' (`metrics.jsonl`, TensorBoard, a
progress line, `summary.json`), so `s3ta.analysis.curves` reads it unchanged:
label `learner` carries the counters (`learner_frames` = environment steps played,
`train_seconds`, which continue across resumes, `param_version` = generation),
label `actor_es` each generation's mean rollout return, label `evaluator` the mean's
evaluations. Checkpoints: `s3ta/evolution/cma_es.py`.
"""

import dataclasses
import json
import math
import os
import pickle
import time
from typing import Any, Callable, Optional

import numpy as np

from s3ta.envs import vision_tasks
from s3ta.evolution import cma_es, dispatch, policy
from s3ta.utils import dataclass_config
from s3ta.utils import metrics as metrics_lib

EVAL_SEED_OFFSET = 1_000_000_007  # evaluation seeds: a range training never draws from
TRAIN_SEED_RANGE = 1_000_000_000
EVALUATION_SEEDS = ('fresh', 'fixed')


def validate_config(config: Any) -> None:
  """ValueError naming the first bad value of an evolution config."""
  dataclass_config.reject_nan(config, 'config')
  vision_tasks.validate(config.task.name, config.task.modification, config.task.max_steps)
  es = config.es
  checks = (
      ('es.population_size', es.population_size, 2), ('es.rollouts_per_candidate',
                                                       es.rollouts_per_candidate, 1),
      ('num_workers', config.num_workers, 1), ('envs_per_worker', config.envs_per_worker, 1),
      ('evaluator.rollouts', config.evaluator.rollouts, 1),
      ('evaluator.every_generations', config.evaluator.every_generations, 0),
      ('max_generations', config.max_generations, 1),
      ('task.negative_reward_patience', config.task.negative_reward_patience, 0),
      ('es.init_seed', es.get('init_seed', -1), -1),
  )
  for name, value, least in checks:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
      raise ValueError(f'config.{name} must be an integer >= {least}, got {value!r}.')
  if config.evaluator.get('seeds', 'fixed') not in EVALUATION_SEEDS:
    raise ValueError(f'config.evaluator.seeds must be one of {EVALUATION_SEEDS}, '
                     f'got {config.evaluator.seeds!r}.')
  if es.get('sigma_adaptation', 'pycma') not in cma_es.SIGMA_ADAPTATIONS:
    raise ValueError(f'config.es.sigma_adaptation must be one of '
                     f'{tuple(cma_es.SIGMA_ADAPTATIONS)}, got {es.sigma_adaptation!r}.')
  if not isinstance(es.get('mirrored', False), bool):
    raise ValueError(f'config.es.mirrored must be True or False, got {es.mirrored!r}.')
  if es.get('mirrored', False) and es.population_size < 4:
    raise ValueError(f'config.es.mirrored needs config.es.population_size >= 4 (a mirrored pair '
                     f'beside the step-size rule\'s own), got {es.population_size}.')
  if not (isinstance(es.init_sigma, (int, float)) and es.init_sigma > 0):
    raise ValueError(f'config.es.init_sigma must be > 0, got {es.init_sigma!r}.')
  for name, value in (('max_seconds', config.max_seconds), ('unit_timeout_s', config.unit_timeout_s)):
    if not (isinstance(value, (int, float)) and value > 0):
      raise ValueError(f'config.{name} must be > 0, got {value!r}.')
  if not (isinstance(config.checkpoint_minutes, (int, float)) and config.checkpoint_minutes >= 0):
    raise ValueError(f'config.checkpoint_minutes must be >= 0, got {config.checkpoint_minutes!r}.')
  policy.agent_config(config.agent, vision_tasks.OUTPUT_SIZES[config.task.name])  # sizes


def starting_mean_seed(config: Any) -> int:
  """The seed of the starting mean's Flax initialisation: `es.init_seed`, or `seed` when it is
  -1. Kept apart from the seed of CMA-ES's sampling and the episodes so either can be varied
  alone (which of the two made a run good)."""
  init_seed = config.es.get('init_seed', -1)
  return config.seed if init_seed == -1 else init_seed


def _check_strategy_settings(saved: dict, es: Any, size: int, where: str) -> None:
  """ValueError if the config asks for a strategy other than the checkpoint's: a resumed
  strategy keeps its population, covariance form and step-size rule, so a changed
  `--config.es.*` would otherwise be silently ignored."""
  wanted = dict(population_size=es.population_size, diagonal=bool(es.diagonal),
                sigma_adaptation=cma_es.resolved_sigma_adaptation(
                    es.get('sigma_adaptation', 'pycma'), size),
                mirrored=bool(es.get('mirrored', False)))
  for key, value in wanted.items():
    if saved[key] != value:
      raise ValueError(f'the checkpoint in {where} was made with es.{key}={saved[key]!r}, this '
                       f'config asks for {value!r}; resume with the same value or use another '
                       '--workdir.')


def training_seeds(seed: int, generation: int, rollouts: int) -> np.ndarray:
  """The episode seeds every candidate of `generation` plays."""
  rng = np.random.default_rng([seed, generation])
  return rng.integers(0, TRAIN_SEED_RANGE, size=rollouts)


def evaluation_seeds(rollouts: int, evaluation: int = 0) -> np.ndarray:
  """The seeds of the `evaluation`-th evaluation: block `evaluation` of the evaluation range
  (fresh seeds; fixed seeds are always block 0)."""
  return EVAL_SEED_OFFSET + evaluation * rollouts + np.arange(rollouts)


def population_units(candidates: np.ndarray, seeds: np.ndarray, workers: int) -> list:
  """Units of several candidates each, about two per worker (a slow worker then holds less)."""
  return [(candidates[rows], np.tile(seeds, (rows.stop - rows.start, 1)))
          for rows in dispatch.split_rows(len(candidates), 2 * workers)]


def evaluation_units(vector: np.ndarray, seeds: np.ndarray, workers: int) -> list:
  """One candidate's evaluation episodes spread over the workers."""
  return [(vector[None], seeds[None, rows]) for rows in dispatch.split_rows(len(seeds), workers)]


@dataclasses.dataclass
class Summary:
  generations: int
  frames: int
  train_seconds: float
  best_fitness: float
  final_eval_mean: Optional[float]
  final_eval_std: Optional[float]
  worker_deaths: int
  stop_reason: str


class Controller:
  """Runs generations until a stop rule or `should_stop`; see the module docstring."""

  def __init__(self, config: Any, workdir: str, dispatcher: dispatch.Dispatcher, *,
               log: Callable[[str], None] = print, tensorboard: bool = True):
    validate_config(config)
    self.config, self.workdir, self.dispatcher, self._log = config, workdir, dispatcher, log
    self.agent_config = policy.agent_config(config.agent,
                                            vision_tasks.OUTPUT_SIZES[config.task.name])
    start_seed = starting_mean_seed(config)
    agent = policy.FlatAgent(self.agent_config, seed=start_seed)
    self.size = agent.size
    restored = cma_es.restore(workdir)
    if restored is None:
      self.state = cma_es.new_state(agent.initial, config.es.init_sigma,
                                    config.es.population_size, config.seed, config.es.diagonal,
                                    config.es.get('sigma_adaptation', 'pycma'),
                                    config.es.get('mirrored', False))
      settings = cma_es.settings(self.state.strategy)
      log(f'[evolve] new run: {config.task.name} ({config.task.modification}), '
          f'{self.size:,} parameters, population {config.es.population_size}'
          f'{" in mirrored pairs" if settings["mirrored"] else ""}, '
          f'{config.es.rollouts_per_candidate} rollouts per candidate, sigma {config.es.init_sigma} '
          f'adapted by {settings["sigma_adaptation"].upper()}, starting mean of seed {start_seed}')
    else:
      self.state, payload = restored
      saved = np.asarray(payload['centre']).size
      if saved != self.size:
        raise ValueError(f'the checkpoint in {cma_es.checkpoint_dir(workdir)} has {saved} '
                         f'parameters, this config\'s agent {self.size}; use another --workdir '
                         'or the config it was trained with.')
      _check_strategy_settings(cma_es.settings(self.state.strategy), config.es, self.size,
                               cma_es.checkpoint_dir(workdir))
      log(f'[evolve] resumed at generation {self.state.counters["generation"]} '
          f'({self.state.counters["frames"]:,} frames, best fitness {self.state.best_fitness:.1f})')
    self._learner_log = metrics_lib.MetricsWriter(workdir, 'learner', tensorboard=tensorboard)
    self._actor_log = metrics_lib.record_logger(workdir, 'actor_es', 'generation')
    self._eval_log = metrics_lib.record_logger(workdir, 'evaluator', 'param_version', 'frames')
    self._last_save = time.monotonic()
    self._deaths_before = int(self.state.counters.get('worker_deaths', 0))

  def _counters(self) -> dict:
    return self.state.counters

  def _save(self) -> str:
    extra = dict(config=self.config.to_dict(), agent_config=dataclasses.asdict(self.agent_config))
    path = cma_es.save(self.workdir, self.state, extra)
    self._last_save = time.monotonic()
    return path

  def evaluate(self, should_stop: Callable[[], bool]) -> Optional[tuple]:
    """(mean, std) of the distribution's mean over the evaluation episodes; None if stopped."""
    counters = self._counters()
    fresh = self.config.evaluator.get('seeds', 'fixed') == 'fresh'
    evaluation = counters.get('evaluations', 0)  # evaluations so far, across resumes
    seeds = evaluation_seeds(self.config.evaluator.rollouts, evaluation if fresh else 0)
    results = self.dispatcher.run(
        evaluation_units(cma_es.centre(self.state), seeds, self.dispatcher.live_workers),
        should_stop)
    if results is None:
      return None
    returns = np.concatenate([r[0].reshape(-1) for r in results])
    counters['evaluations'] = evaluation + 1
    counters['frames'] += sum(r[1] for r in results)  # evaluation episodes are played too
    self._eval_log(dict(param_version=counters['generation'], frames=counters['frames'],
                        mean_return=float(returns.mean()), std_return=float(returns.std()),
                        episodes=len(returns), min_return=float(returns.min()),
                        max_return=float(returns.max())))
    self.state = cma_es.record_evaluation(self.state, float(returns.mean()))
    self._log(f'[evolve] evaluation at generation {counters["generation"]}: mean '
              f'{returns.mean():.1f} ± {returns.std() / math.sqrt(len(returns)):.1f} (s.e.) over '
              f'{len(returns)} episodes, {"fresh" if fresh else "fixed"} seeds '
              f'{seeds[0]}-{seeds[-1]}')
    return float(returns.mean()), float(returns.std())

  def generation(self, should_stop: Callable[[], bool]) -> bool:
    """Scores and tells one generation; False if stopped before it completed."""
    start = time.monotonic()
    counters = self._counters()
    # pycma cannot take back an `ask`: a strategy saved between ask and tell fails on its next
    # ask (its step-size rule expects the samples it injected). An interrupted generation
    # therefore restores this copy before anything is saved.
    before_ask = pickle.dumps(self.state.strategy, protocol=pickle.HIGHEST_PROTOCOL)
    candidates = np.asarray(self.state.strategy.ask(), np.float64)
    seeds = training_seeds(self.config.seed, counters['generation'],
                           self.config.es.rollouts_per_candidate)
    results = self.dispatcher.run(
        population_units(candidates, seeds, self.dispatcher.live_workers), should_stop)
    if results is None:
      self.state = self.state._replace(strategy=pickle.loads(before_ask))
      return False
    returns = np.concatenate([r[0] for r in results])  # [population, rollouts]
    fitness = returns.mean(axis=1)
    self.state = cma_es.tell(self.state, candidates, fitness)
    seconds = time.monotonic() - start
    steps = sum(r[1] for r in results)
    counters['generation'] += 1
    counters['frames'] += steps
    counters['rollouts'] += returns.size
    counters['train_seconds'] += seconds
    counters['worker_deaths'] = self._deaths_before + self.dispatcher.deaths
    self._learner_log.write(counters['generation'], dict(
        learner_frames=counters['frames'], train_seconds=counters['train_seconds'],
        param_version=counters['generation'], fitness_mean=fitness.mean(),
        fitness_max=fitness.max(), fitness_min=fitness.min(), fitness_std=fitness.std(),
        best_fitness=self.state.best_fitness, sigma=float(self.state.strategy.sigma),
        generation_seconds=seconds, frames_per_s=steps / max(seconds, 1e-9),
        worker_deaths=counters['worker_deaths'], live_workers=self.dispatcher.live_workers),
        frames=counters['frames'])
    self._learner_log.flush()
    self._actor_log(dict(generation=counters['generation'], window_episodes=returns.size,
                         window_return_mean=float(returns.mean())))
    self._log(f'gen {counters["generation"]} | frames {counters["frames"]:,} '
              f'({steps / max(seconds, 1e-9):,.0f}/s) | fitness mean {fitness.mean():.1f} max '
              f'{fitness.max():.1f} | best {self.state.best_fitness:.1f} | sigma '
              f'{self.state.strategy.sigma:.4f} | {seconds:.1f} s | workers '
              f'{self.dispatcher.live_workers} live, {counters["worker_deaths"]} deaths')
    return True

  def stop_reason(self) -> Optional[str]:
    counters = self._counters()
    if counters['generation'] >= self.config.max_generations:
      return f'max_generations ({self.config.max_generations})'
    if counters['train_seconds'] >= self.config.max_seconds:
      return f'max_seconds ({self.config.max_seconds:.0f} s of evolution)'
    return None

  def run(self, should_stop: Callable[[], bool] = lambda: False) -> Summary:
    """Generations until a stop rule; saves and evaluates at the end. Returns the summary."""
    config = self.config
    reason = None
    try:
      while reason is None:
        if should_stop():
          reason = 'stopped (signal)'
          break
        if not self.generation(should_stop):
          reason = 'stopped (signal)'
          break
        generation = self._counters()['generation']
        every = config.evaluator.every_generations
        if every and generation % every == 0:
          self.evaluate(should_stop)
        if time.monotonic() - self._last_save >= 60.0 * config.checkpoint_minutes:
          self._log(f'[evolve] checkpoint {self._save()}')
        reason = self.stop_reason()
    except dispatch.NoWorkersLeft as e:
      reason = f'no workers left ({e})'
    final = None
    if not reason.startswith(('stopped', 'no workers')):
      final = self.evaluate(should_stop)
    self._log(f'[evolve] {reason}; checkpoint {self._save()}')
    counters = self._counters()
    summary = Summary(generations=counters['generation'], frames=counters['frames'],
                      train_seconds=counters['train_seconds'],
                      best_fitness=self.state.best_fitness,
                      final_eval_mean=final[0] if final else None,
                      final_eval_std=final[1] if final else None,
                      worker_deaths=counters['worker_deaths'], stop_reason=reason)
    with open(os.path.join(self.workdir, 'summary.json'), 'w') as f:
      json.dump({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                 for k, v in dataclasses.asdict(summary).items()}, f, indent=2)
    self._learner_log.close()
    self._log(f'[evolve] summary: {json.dumps(dataclasses.asdict(summary))}')
    return summary
