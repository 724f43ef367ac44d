"""Pure PBT logic: member records, readiness, exploit (donor choice) and explore.

Nothing here talks to a learner: functions take records and a seeded
`np.random.Generator` and return decisions, so every rule is unit-testable with
fixed seeds. `s3ta.pbt.controller` applies the decisions to real members.
"""

import copy
import dataclasses
import math
from typing import Mapping, Optional, Sequence

import numpy as np

from s3ta.pbt.config import PBTConfig


@dataclasses.dataclass
class MemberRecord:
  """What the controller knows about one member."""
  member_id: int
  hyperparams: dict  # name -> float, the values the member trains with now
  frames: int = 0  # environment frames the member has consumed (last poll)
  fitness: Optional[float] = None  # mean capped human-normalised score; None = not known yet
  num_episodes: int = 0  # recent episodes behind `fitness`
  last_change_frames: int = 0  # frames at the last exploit/explore decision
  generation: int = 0  # number of exploits in the ancestry of the current weights
  lineage: list = dataclasses.field(default_factory=list)  # ancestry of the current weights

  def to_json(self) -> dict:
    return dataclasses.asdict(self)

  @classmethod
  def from_json(cls, values: Mapping) -> 'MemberRecord':
    return cls(**dict(values))


def initial_hyperparams(config: PBTConfig, base: Mapping[str, float], init_ranges: Mapping[str, Sequence[float]],
                        rng: np.random.Generator) -> list:
  """Hyperparameters of each member at the start.

  `base` holds the learner's defaults; names in `init_ranges` are drawn log-uniformly
  from (low, high) per member (IMPALA App. F samples its population this way).
  """
  population = []
  for _ in range(config.population_size):
    values = {name: float(value) for name, value in base.items()}
    for name in sorted(init_ranges):
      low, high = (float(v) for v in init_ranges[name])
      if not 0 < low <= high:
        raise ValueError(f'PBT init range for {name} must satisfy 0 < low <= high, got {init_ranges[name]}.')
      values[name] = float(math.exp(rng.uniform(math.log(low), math.log(high))))
    population.append(values)
  return population


def is_ready(record: MemberRecord, config: PBTConfig) -> bool:
  """Ready = past burn-in, an interval since the last change, and a known fitness."""
  return (record.frames >= config.burn_in_frames and
          record.frames - record.last_change_frames >= config.ready_interval_frames and
          record.fitness is not None and record.num_episodes >= config.min_episodes)


def _has_fitness(record: MemberRecord, config: PBTConfig) -> bool:
  return record.fitness is not None and record.num_episodes >= config.min_episodes


def choose_donors_impala(records: Sequence[MemberRecord], ready: Sequence[int], config: PBTConfig,
                         rng: np.random.Generator) -> dict:
  """IMPALA (Espeholt et al. 2018, App. F): each ready member compares itself with one
  uniformly random other member (with a fitness) and copies it if that one is better by
  more than `exploit_threshold`. Returns {recipient: donor}."""
  by_id = {r.member_id: r for r in records}
  donors = {}
  for member_id in sorted(ready):
    others = sorted(r.member_id for r in records if r.member_id != member_id and _has_fitness(r, config))
    if not others:
      continue
    other = others[int(rng.integers(len(others)))]
    if by_id[other].fitness - by_id[member_id].fitness > config.exploit_threshold:
      donors[member_id] = other
  return donors


def choose_donors_truncation(records: Sequence[MemberRecord], ready: Sequence[int], config: PBTConfig,
                             rng: np.random.Generator) -> dict:
  """Truncation selection (Jaderberg et al. 2017): rank the members that have a fitness;
  a ready member in the bottom `truncation_fraction` copies a uniformly random member of
  the top fraction (if better by more than `exploit_threshold`). Ties rank by member id."""
  ranked = sorted((r for r in records if _has_fitness(r, config)), key=lambda r: (r.fitness, -r.member_id))
  if len(ranked) < 2:
    return {}
  count = max(1, int(math.floor(len(ranked) * config.truncation_fraction)))
  bottom = [r.member_id for r in ranked[:count]]
  top = sorted(r.member_id for r in ranked[-count:])
  by_id = {r.member_id: r for r in records}
  donors = {}
  for member_id in sorted(ready):
    if member_id not in bottom:
      continue
    donor = top[int(rng.integers(len(top)))]
    if by_id[donor].fitness - by_id[member_id].fitness > config.exploit_threshold:
      donors[member_id] = donor
  return donors


def choose_donors(records: Sequence[MemberRecord], ready: Sequence[int], config: PBTConfig,
                  rng: np.random.Generator) -> dict:
  if config.exploit == 'impala':
    return choose_donors_impala(records, ready, config, rng)
  if config.exploit == 'truncation':
    return choose_donors_truncation(records, ready, config, rng)
  raise ValueError(f'Unknown PBT exploit strategy {config.exploit!r}.')


def perturb(hyperparams: Mapping[str, float], config: PBTConfig, rng: np.random.Generator) -> dict:
  """Explore: each evolved hyperparameter, with probability `perturb_probability`, is
  multiplied by `perturb_factor` or its inverse (equally likely), then clipped to its
  bounds. Names are visited in sorted order so draws are reproducible."""
  new = {name: float(value) for name, value in hyperparams.items()}
  for name in sorted(config.evolve):
    if name not in new:
      raise ValueError(f'Member hyperparameters lack evolved name {name!r}: {sorted(new)}.')
    if rng.random() < config.perturb_probability:
      factor = config.perturb_factor if rng.random() < 0.5 else 1.0 / config.perturb_factor
      low, high = config.bounds[name]
      new[name] = float(min(max(new[name] * factor, low), high))
  return new


def lineage_entry(event: str, *, time: float, frames: int, member: int, hyperparams: Mapping[str, float],
                  donor: Optional[int] = None, fitness: Optional[float] = None) -> dict:
  entry = {'event': event, 'time': time, 'frames': int(frames), 'member': int(member),
           'hyperparams': dict(hyperparams), 'fitness': fitness}
  if donor is not None:
    entry['donor'] = int(donor)
  return entry


def inherit(recipient: MemberRecord, donor: MemberRecord, entry: dict) -> None:
  """Recipient takes the donor's weights: its lineage becomes the donor's plus `entry`."""
  recipient.lineage = copy.deepcopy(donor.lineage) + [entry]
  recipient.generation = donor.generation + 1
  recipient.hyperparams = dict(donor.hyperparams)
