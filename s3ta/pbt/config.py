"""PBT settings, validated once (ValueError naming the bad value).

Fitness is the mean capped human-normalised score in the units of
`s3ta.envs.human_scores` (a fraction: 1.0 = human level), so the IMPALA
"5 % better" rule is `exploit_threshold = 0.05` (absolute).
"""

import dataclasses
from typing import Any, Mapping

from s3ta.types import HYPERPARAM_NAMES  # what PBT can evolve
from s3ta.utils import dataclass_config

EXPLOIT_STRATEGIES = ('impala', 'truncation')

# Default clipping bounds of explored values (inclusive); wide around the paper's values.
DEFAULT_BOUNDS = {
    'learning_rate': (1e-6, 1e-2),
    'entropy_cost': (1e-5, 0.1),
    'rmsprop_epsilon': (1e-8, 1.0),
    'grad_clip': (1.0, 1e5),
}


@dataclasses.dataclass(frozen=True)
class PBTConfig:
  """How the population evolves (defaults: IMPALA App. F / S3TA App. A.2)."""
  population_size: int = 16  # number of members (independent learners)
  evolve: tuple = HYPERPARAM_NAMES  # which hyperparameters explore perturbs
  exploit: str = 'impala'  # 'impala' (random other member) or 'truncation'
  exploit_threshold: float = 0.05  # copy only if donor fitness - own fitness > this (absolute)
  truncation_fraction: float = 0.25  # truncation: bottom fraction copies from top fraction
  perturb_probability: float = 1 / 3  # chance that explore perturbs each evolved hyperparameter
  perturb_factor: float = 1.2  # a perturbation multiplies by this or by its inverse
  explore_without_exploit: bool = False  # also explore members that kept their own weights
  bounds: Mapping[str, tuple] = dataclasses.field(default_factory=lambda: dict(DEFAULT_BOUNDS))
  ready_interval_frames: int = 10_000_000  # frames between two changes of one member
  burn_in_frames: int = 20_000_000  # no evolution before a member has seen this many frames
  min_episodes: int = 1  # a member has a fitness once this many recent episodes are in
  poll_interval_s: float = 30.0  # controller: seconds between two polls of the population
  seed: int = 0  # seeds the controller's numpy Generator (all PBT randomness)

  def __post_init__(self):
    if not isinstance(self.population_size, int) or self.population_size < 2:
      raise ValueError(f'PBT population_size must be an integer >= 2, got {self.population_size!r}.')
    evolve = tuple(self.evolve)
    object.__setattr__(self, 'evolve', evolve)
    unknown = [name for name in evolve if name not in HYPERPARAM_NAMES]
    if unknown:
      raise ValueError(f'Unknown PBT hyperparameter name(s) {unknown} in evolve; valid names: '
                       f'{list(HYPERPARAM_NAMES)}.')
    if len(set(evolve)) != len(evolve):
      raise ValueError(f'PBT evolve lists a hyperparameter twice: {list(evolve)}.')
    if self.exploit not in EXPLOIT_STRATEGIES:
      raise ValueError(f'Unknown PBT exploit strategy {self.exploit!r}; valid: {EXPLOIT_STRATEGIES}.')
    if self.exploit_threshold < 0:
      raise ValueError(f'PBT exploit_threshold must be >= 0, got {self.exploit_threshold}.')
    if not 0 < self.truncation_fraction <= 0.5:
      raise ValueError(f'PBT truncation_fraction must be in (0, 0.5], got {self.truncation_fraction}.')
    if not 0 <= self.perturb_probability <= 1:
      raise ValueError(f'PBT perturb_probability must be in [0, 1], got {self.perturb_probability}.')
    if self.perturb_factor <= 1:
      raise ValueError(f'PBT perturb_factor must be > 1, got {self.perturb_factor}.')
    if self.ready_interval_frames <= 0:
      raise ValueError(f'PBT ready_interval_frames must be > 0, got {self.ready_interval_frames}.')
    if self.burn_in_frames < 0:
      raise ValueError(f'PBT burn_in_frames must be >= 0, got {self.burn_in_frames}.')
    if self.min_episodes < 1:
      raise ValueError(f'PBT min_episodes must be >= 1, got {self.min_episodes}.')
    if self.poll_interval_s <= 0:
      raise ValueError(f'PBT poll_interval_s must be > 0, got {self.poll_interval_s}.')
    bounds = dict(DEFAULT_BOUNDS)
    for name, value in dict(self.bounds).items():
      if name not in HYPERPARAM_NAMES:
        raise ValueError(f'Unknown PBT hyperparameter name {name!r} in bounds; valid names: '
                         f'{list(HYPERPARAM_NAMES)}.')
      low, high = (float(v) for v in value)
      if not 0 < low <= high:
        raise ValueError(f'PBT bounds for {name} must satisfy 0 < low <= high, got {value}.')
      bounds[name] = (low, high)
    object.__setattr__(self, 'bounds', bounds)

  @classmethod
  def from_dict(cls, values: Any) -> 'PBTConfig':
    return dataclass_config.from_dict(cls, values, 'PBT')

  def to_dict(self) -> dict:
    out = dataclasses.asdict(self)
    out['evolve'] = list(self.evolve)
    out['bounds'] = {k: list(v) for k, v in self.bounds.items()}
    return out
