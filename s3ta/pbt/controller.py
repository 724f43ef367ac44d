"""The PBT controller: polls members, applies exploit/explore, logs, saves its state.

The controller talks to members only through the small `Member` protocol below, so
it runs the same against in-process fakes (unit tests) and against courier handles
of real learner nodes (`s3ta.pbt.node.CourierMember`). It is single-threaded and
side-effecting; every decision comes from the pure functions in `population`.

Files in `workdir` (see `storage`): `pbt_state.json` (population, lineage,
counters, rng state; rewritten atomically after every poll, restored when a
controller starts on the same workdir), `pbt_events.jsonl` (one line per exploit
or explore event) and `pbt_fitness.jsonl` (one line per member per poll).
"""

import logging
import math
import os
import time
from typing import Any, Callable, Mapping, Optional, Protocol, Sequence

import numpy as np

from s3ta.pbt import population as pop
from s3ta.pbt import storage
from s3ta.pbt.config import PBTConfig

STATE_VERSION = 1


class Member(Protocol):
  """What the controller needs from one population member (a learner).

  get_fitness() -> {'frames': int, 'fitness': float or None, 'num_episodes': int,
                    optional 'per_game': {game: {...}}, optional 'done': bool (training ended)}
  get_state()   -> opaque picklable copy of (params, optimiser state) to hand to another member
  set_state(state, hyperparams): replace params + optimiser state and hyperparameters
                    (and forget the recent episodes that made up the old fitness)
  set_hyperparams(hyperparams): change hyperparameters only (no recompilation)
  """

  def get_fitness(self) -> Mapping[str, Any]:
    ...

  def get_state(self) -> Any:
    ...

  def set_state(self, state: Any, hyperparams: Mapping[str, float]) -> None:
    ...

  def set_hyperparams(self, hyperparams: Mapping[str, float]) -> None:
    ...


def _finite_or_none(value) -> Optional[float]:
  if value is None:
    return None
  value = float(value)
  return value if math.isfinite(value) else None


class Controller:
  """Population-based training over `members` (index = member id)."""

  def __init__(self, config: PBTConfig, members: Sequence[Member], workdir: str,
               base_hyperparams: Mapping[str, float],
               init_ranges: Optional[Mapping[str, Sequence[float]]] = None,
               clock: Callable[[], float] = time.time,
               scalar_writer: Optional[Callable[[int, str, float, int], None]] = None):
    if len(members) != config.population_size:
      raise ValueError(f'PBT got {len(members)} members for population_size {config.population_size}.')
    self._config = config
    self._members = list(members)
    self._workdir = workdir
    self._clock = clock
    self._scalar_writer = scalar_writer
    os.makedirs(workdir, exist_ok=True)
    self.state_path = os.path.join(workdir, storage.STATE_FILE)
    self.events_path = os.path.join(workdir, storage.EVENTS_FILE)
    self.fitness_path = os.path.join(workdir, storage.FITNESS_FILE)
    self._rng = np.random.default_rng(config.seed)
    self.counters = {'polls': 0, 'exploits': 0, 'explores': 0, 'ready_checks': 0, 'restarts': 0}
    self.restored = os.path.exists(self.state_path)
    if self.restored:
      self._restore()
      self.counters['restarts'] += 1
    else:
      now = self._clock()
      values = pop.initial_hyperparams(config, base_hyperparams, init_ranges or {}, self._rng)
      self.records = [
          pop.MemberRecord(member_id=i, hyperparams=hp,
                           lineage=[pop.lineage_entry('init', time=now, frames=0, member=i, hyperparams=hp)])
          for i, hp in enumerate(values)
      ]
    # Members whose learner reported that its training loop has ended (not persisted).
    self.done = {}
    # Members whose learner has not yet received the controller's hyperparameters.
    self._unsynced = set(range(config.population_size))
    self.save()

  # ---- persistence -------------------------------------------------------------------

  def to_json(self) -> dict:
    return {'version': STATE_VERSION, 'config': self._config.to_dict(), 'counters': dict(self.counters),
            'rng': self._rng.bit_generator.state, 'members': [r.to_json() for r in self.records]}

  def save(self) -> None:
    storage.write_json_atomic(self.state_path, self.to_json())

  def _restore(self) -> None:
    state = storage.read_json(self.state_path)
    if state.get('version') != STATE_VERSION:
      raise ValueError(f'{self.state_path}: unsupported PBT state version {state.get("version")!r}.')
    members = state['members']
    if len(members) != self._config.population_size:
      raise ValueError(f'{self.state_path} holds {len(members)} members but population_size is '
                       f'{self._config.population_size}; use a new workdir to change the population size.')
    self.records = [pop.MemberRecord.from_json(m) for m in members]
    self.counters.update(state.get('counters', {}))
    self._rng.bit_generator.state = state['rng']
    logging.info('PBT: restored %d members from %s (%d exploits, %d explores so far).', len(self.records),
                 self.state_path, self.counters['exploits'], self.counters['explores'])

  # ---- one round ---------------------------------------------------------------------

  def _sync_hyperparams(self) -> None:
    for member_id in sorted(self._unsynced):
      try:
        self._members[member_id].set_hyperparams(self.records[member_id].hyperparams)
        self._unsynced.discard(member_id)
      except Exception as e:  # pylint: disable=broad-except
        logging.warning('PBT: could not set hyperparameters of member %d yet: %s', member_id, e)

  def _poll(self, now: float) -> None:
    for record in self.records:
      try:
        info = self._members[record.member_id].get_fitness()
      except Exception as e:  # pylint: disable=broad-except
        logging.warning('PBT: member %d did not answer get_fitness: %s', record.member_id, e)
        continue
      frames = int(info.get('frames', 0))
      if frames < record.frames:  # the learner restarted (e.g. from an older checkpoint)
        record.last_change_frames = min(record.last_change_frames, frames)
      record.frames = frames
      record.fitness = _finite_or_none(info.get('fitness'))
      record.num_episodes = int(info.get('num_episodes', 0))
      self.done[record.member_id] = bool(info.get('done', False))
      line = {'time': now, 'member': record.member_id, 'frames': frames, 'fitness': record.fitness,
              'num_episodes': record.num_episodes, 'hyperparams': record.hyperparams,
              'generation': record.generation, 'done': self.done[record.member_id]}
      if 'per_game' in info:
        line['per_game'] = info['per_game']
      storage.append_jsonl(self.fitness_path, line)
      if self._scalar_writer is not None:
        if record.fitness is not None:
          self._scalar_writer(record.member_id, 'pbt/fitness', record.fitness, frames)
        for name, value in record.hyperparams.items():
          self._scalar_writer(record.member_id, f'pbt/{name}', value, frames)

  def _event(self, kind: str, now: float, record: pop.MemberRecord, old: Mapping, new: Mapping,
             donor: Optional[pop.MemberRecord]) -> dict:
    event = {'time': now, 'event': kind, 'frames': record.frames, 'member': record.member_id,
             'donor': None if donor is None else donor.member_id, 'old_hyperparams': dict(old),
             'new_hyperparams': dict(new), 'changed': sorted(k for k in new if new[k] != old.get(k)),
             'fitness': record.fitness, 'donor_fitness': None if donor is None else donor.fitness,
             'generation': record.generation}
    storage.append_jsonl(self.events_path, event)
    logging.info('PBT %s: member %d%s %s -> %s', kind, record.member_id,
                 '' if donor is None else f' <- {donor.member_id}', dict(old), dict(new))
    return event

  def step(self, evolve: bool = True) -> list:
    """Polls every member once, evolves the ready ones; returns the events of this round."""
    now = self._clock()
    self.counters['polls'] += 1
    self._sync_hyperparams()
    self._poll(now)
    if not evolve:
      self.save()
      return []
    ready = [r.member_id for r in self.records
             if pop.is_ready(r, self._config) and not self.done.get(r.member_id)]
    self.counters['ready_checks'] += len(ready)
    donors = pop.choose_donors(self.records, ready, self._config, self._rng)
    # Snapshot every donor before any member changes (a donor may also be a recipient).
    donor_states = {}
    for donor in sorted(set(donors.values())):
      try:
        donor_states[donor] = self._members[donor].get_state()
      except Exception as e:  # pylint: disable=broad-except
        logging.warning('PBT: could not get the state of donor %d: %s', donor, e)
    events = []
    for member_id in sorted(ready):
      record = self.records[member_id]
      donor_id = donors.get(member_id)
      exploit = donor_id is not None and donor_id in donor_states
      hyperparams = dict(self.records[donor_id].hyperparams) if exploit else dict(record.hyperparams)
      explored = hyperparams
      if exploit or self._config.explore_without_exploit:
        explored = pop.perturb(hyperparams, self._config, self._rng)
      try:
        if exploit:
          self._members[member_id].set_state(donor_states[donor_id], explored)
        elif explored != record.hyperparams:
          self._members[member_id].set_hyperparams(explored)
      except Exception as e:  # pylint: disable=broad-except
        logging.warning('PBT: could not update member %d: %s', member_id, e)
        continue
      old = dict(record.hyperparams)
      if exploit:
        donor = self.records[donor_id]
        entry = pop.lineage_entry('exploit', time=now, frames=record.frames, member=member_id,
                                  donor=donor_id, hyperparams=donor.hyperparams, fitness=donor.fitness)
        events.append(self._event('exploit', now, record, old, donor.hyperparams, donor))
        pop.inherit(record, donor, entry)
        self.counters['exploits'] += 1
      if explored != record.hyperparams:
        events.append(self._event('explore', now, record, record.hyperparams, explored, None))
        record.lineage.append(pop.lineage_entry('explore', time=now, frames=record.frames, member=member_id,
                                                hyperparams=explored, fitness=record.fitness))
        record.hyperparams = dict(explored)
        self.counters['explores'] += 1
      if exploit:  # the old fitness belongs to the weights just replaced
        record.fitness, record.num_episodes = None, 0
      record.last_change_frames = record.frames
    self.save()
    return events

  def all_done(self) -> bool:
    """True once every member's learner reported that it finished training."""
    return len(self.done) == len(self.records) and all(self.done.values())

  def best_member(self) -> Optional[pop.MemberRecord]:
    known = [r for r in self.records if r.fitness is not None]
    return max(known, key=lambda r: (r.fitness, -r.member_id)) if known else None

  def run(self, should_stop: Callable[[], bool], max_rounds: Optional[int] = None,
          sleep: Callable[[float], None] = time.sleep) -> None:
    """Polls every `poll_interval_s` until `should_stop()` (checked every ≤ 0.5 s)."""
    rounds = 0
    while not should_stop() and (max_rounds is None or rounds < max_rounds) and not self.all_done():
      self.step()
      rounds += 1
      if self.all_done() or (max_rounds is not None and rounds >= max_rounds):
        break
      deadline = time.monotonic() + self._config.poll_interval_s
      while not should_stop() and time.monotonic() < deadline:
        sleep(min(0.5, max(0.0, deadline - time.monotonic())))
