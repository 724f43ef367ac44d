"""CMA-ES over flat agent vectors (pycma, 004's settings), and its checkpoints that resume.

004 uses pycma with population 256, initial sigma 0.1 and pycma's defaults otherwise.
pycma minimises, so `tell` passes the negated fitness (mean return). Checkpoints are
pickles of the whole strategy (its mean, step size, covariance, evolution paths and
random state), written to a temporary file and renamed into place; the newest `keep`
are kept, so a crash while saving leaves the previous one intact. Every checkpoint also
carries the distribution mean that scored best on the evaluation seeds so far
(`best_eval_vector`): model selection on episodes that neither training nor the 100-episode
test (seeds 0-99) plays.

Step-size rule: pycma 4.x adapts sigma by two-point adaptation (TPA) for 300 or more
dimensions and by cumulative step-size adaptation (CSA) below; 004's agent has 3,633, and
the pycma of 2020 chose CSA for full-covariance CMA-ES at that size. `sigma_adaptation`
names the rule ('pycma' keeps pycma's own choice).

Mirrored sampling (`mirrored`): every sampled candidate m + sigma z comes with its mirror
m - sigma z (pycma's unconditional mirroring, as many pairs as the population holds beside
TPA's own pair). A pair plays the same episode seeds, so the difference of its two fitnesses
is free of the seeds' noise (antithetic sampling, as in Salimans et al.'s evolution strategies).
"""

import os
import pickle
import re
from typing import Any, NamedTuple, Optional

import cma
from cma import sigma_adaptation as cma_sigma
import numpy as np

CHECKPOINT_DIR = 'checkpoints'
_NAME = re.compile(r'^es_(\d{6,})\.pkl$')
SIGMA_ADAPTATIONS = {'pycma': True, 'csa': cma_sigma.CMAAdaptSigmaCSA,
                     'tpa': cma_sigma.CMAAdaptSigmaTPA}
_RULE_NAMES = {rule: name for name, rule in SIGMA_ADAPTATIONS.items() if name != 'pycma'}  # class -> name


class EvolutionState(NamedTuple):
  strategy: Any  # cma.CMAEvolutionStrategy
  counters: dict  # generation, frames, rollouts, train_seconds, worker_deaths
  best_fitness: float  # best candidate fitness seen (its training rollouts)
  best_vector: Optional[np.ndarray]
  # the distribution mean with the highest evaluation mean so far, and that mean / generation
  best_eval_mean: float = -np.inf
  best_eval_vector: Optional[np.ndarray] = None
  best_eval_generation: int = -1


_EVAL_FIELDS = ('best_eval_mean', 'best_eval_vector', 'best_eval_generation')


def mirrored_pairs(population: int, rule: str) -> int:
  """How many mirrored pairs fit a generation beside the step-size rule's own samples (TPA
  injects one mirrored pair of its own from the second generation on)."""
  return (population - (2 if rule == 'tpa' else 0)) // 2


def new_strategy(x0: np.ndarray, sigma: float, population: int, seed: int,
                 diagonal: bool = False, sigma_adaptation: str = 'pycma',
                 mirrored: bool = False) -> Any:
  """A pycma strategy; `diagonal` is separable CMA (much cheaper for large vectors),
  `sigma_adaptation` one of SIGMA_ADAPTATIONS, `mirrored` samples in mirrored pairs."""
  if sigma_adaptation not in SIGMA_ADAPTATIONS:
    raise ValueError(f'sigma_adaptation must be one of {tuple(SIGMA_ADAPTATIONS)}, '
                     f'got {sigma_adaptation!r}.')
  options = {'popsize': population, 'seed': seed + 1,  # pycma treats seed 0 as "random"
             'AdaptSigma': SIGMA_ADAPTATIONS[sigma_adaptation],
             'verbose': -9, 'verb_disp': 0, 'verb_log': 0, 'verb_filenameprefix': os.devnull}
  if diagonal:
    options['CMA_diagonal'] = True
  if mirrored:
    pairs = mirrored_pairs(population, resolved_sigma_adaptation(sigma_adaptation, len(x0)))
    if pairs < 1:
      raise ValueError(f'mirrored sampling needs room for one mirrored pair; population '
                       f'{population} has none (use a population of at least 4).')
    # pycma reads CMA_mirrors below 0.5 as a fraction of the population, above 1 as a count.
    options.update(CMA_mirrors=pairs if pairs > 1 else pairs / population, CMA_mirrormethod=0)
  return cma.CMAEvolutionStrategy(np.asarray(x0, np.float64), sigma, options)


def resolved_sigma_adaptation(sigma_adaptation: str, dimension: int) -> str:
  """The rule a new strategy of this dimension will use ('pycma' resolved as pycma does)."""
  if sigma_adaptation != 'pycma':
    return sigma_adaptation
  return 'tpa' if dimension >= cma.evolution_strategy.TPA_dimension else 'csa'


def settings(strategy: Any) -> dict:
  """What a strategy was built with and keeps for its whole run: population, separable or
  not, the step-size rule in use ('csa', 'tpa' or pycma's class name), mirrored or not."""
  rule = type(strategy.adapt_sigma)
  return dict(population_size=int(strategy.popsize),
              diagonal=strategy.opts['CMA_diagonal'] is True,
              sigma_adaptation=_RULE_NAMES.get(rule, rule.__name__),
              mirrored=bool(strategy.sp.lam_mirr) and strategy.opts['CMA_mirrormethod'] == 0)


def new_state(x0: np.ndarray, sigma: float, population: int, seed: int,
              diagonal: bool = False, sigma_adaptation: str = 'pycma',
              mirrored: bool = False) -> EvolutionState:
  counters = dict(generation=0, frames=0, rollouts=0, train_seconds=0.0, worker_deaths=0)
  strategy = new_strategy(x0, sigma, population, seed, diagonal, sigma_adaptation, mirrored)
  return EvolutionState(strategy, counters, -np.inf, None)


def tell(state: EvolutionState, candidates: np.ndarray, fitness: np.ndarray) -> EvolutionState:
  """Updates the strategy with the candidates' fitness (higher is better)."""
  state.strategy.tell(list(candidates), list(-np.asarray(fitness, np.float64)))
  best = int(np.argmax(fitness))
  if fitness[best] > state.best_fitness:
    return state._replace(best_fitness=float(fitness[best]),
                          best_vector=np.array(candidates[best], np.float64))
  return state


def record_evaluation(state: EvolutionState, mean_return: float) -> EvolutionState:
  """Keeps the current distribution mean if its evaluation beats every earlier one."""
  if mean_return > state.best_eval_mean:
    return state._replace(best_eval_mean=float(mean_return), best_eval_vector=centre(state),
                          best_eval_generation=int(state.counters['generation']))
  return state


def centre(state: EvolutionState) -> np.ndarray:
  """The distribution's mean: the agent 004 evaluates and deploys."""
  return np.array(state.strategy.mean, np.float64)


def checkpoint_dir(workdir: str) -> str:
  return os.path.join(workdir, CHECKPOINT_DIR)


def list_checkpoints(workdir: str) -> list:
  """[(generation, path)] of complete checkpoints, oldest first."""
  directory = checkpoint_dir(workdir)
  if not os.path.isdir(directory):
    return []
  found = [(int(m.group(1)), os.path.join(directory, name))
           for name in os.listdir(directory) if (m := _NAME.match(name))]
  return sorted(found)


def save(workdir: str, state: EvolutionState, extra: dict, keep: int = 2) -> str:
  """Writes the state (and `extra`: configs) as `es_<generation>.pkl`; keeps the newest `keep`."""
  directory = checkpoint_dir(workdir)
  os.makedirs(directory, exist_ok=True)
  generation = int(state.counters['generation'])
  path = os.path.join(directory, f'es_{generation:06d}.pkl')
  temporary = f'{path}.tmp-{os.getpid()}'
  payload = dict(strategy=state.strategy, counters=dict(state.counters),
                 best_fitness=state.best_fitness, best_vector=state.best_vector,
                 centre=centre(state), **{k: getattr(state, k) for k in _EVAL_FIELDS}, **extra)
  with open(temporary, 'wb') as f:
    pickle.dump(payload, f, protocol=pickle.HIGHEST_PROTOCOL)
    f.flush()
    os.fsync(f.fileno())
  os.replace(temporary, path)
  for _, old in list_checkpoints(workdir)[:-keep]:
    os.remove(old)
  return path


def load(path: str) -> dict:
  """A checkpoint's payload; ValueError naming the file if it cannot be read."""
  try:
    with open(path, 'rb') as f:
      payload = pickle.load(f)
  except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError) as e:
    raise ValueError(f'cannot read evolution checkpoint {path!r}: {e}') from e
  if not isinstance(payload, dict) or 'strategy' not in payload:
    raise ValueError(f'{path!r} is not an evolution checkpoint (no strategy in it).')
  return payload


def restore(workdir: str) -> Optional[tuple]:
  """(EvolutionState, payload) of the newest checkpoint in `workdir`, or None if there is none."""
  found = list_checkpoints(workdir)
  if not found:
    return None
  payload = load(found[-1][1])
  evaluated = {k: payload[k] for k in _EVAL_FIELDS if k in payload}  # older checkpoints: defaults
  state = EvolutionState(payload['strategy'], dict(payload['counters']),
                         float(payload['best_fitness']), payload['best_vector'], **evaluated)
  return state, payload
