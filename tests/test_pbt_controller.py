"""The PBT controller against in-process fake members: exploit/explore, logs, resume."""

import json
import os

import numpy as np
import pytest

from s3ta.pbt import storage
from s3ta.pbt.config import PBTConfig
from s3ta.pbt.controller import Controller

HP = {'learning_rate': 2e-4, 'entropy_cost': 0.01, 'rmsprop_epsilon': 0.01, 'grad_clip': 1280.0}


class FakeMember:
  """A learner stand-in: params are a vector; fitness is a fixed function of the params.

  Its weights "train" by a member-specific amount per poll so members differ."""

  def __init__(self, member_id: int, frames_per_poll: int = 100):
    self.params = np.full(3, float(member_id))
    self.opt_state = np.zeros(3) + 10 * member_id
    self.hyperparams = None
    self.frames = 0
    self.frames_per_poll = frames_per_poll
    self.calls = []

  def get_fitness(self):
    self.frames += self.frames_per_poll
    return {'frames': self.frames, 'fitness': float(self.params[0]) / 10, 'num_episodes': 4}

  def get_state(self):
    return {'params': self.params.copy(), 'opt_state': self.opt_state.copy()}

  def set_state(self, state, hyperparams):
    self.calls.append(('set_state', dict(hyperparams)))
    self.params = state['params'].copy()
    self.opt_state = state['opt_state'].copy()
    self.hyperparams = dict(hyperparams)

  def set_hyperparams(self, hyperparams):
    self.calls.append(('set_hyperparams', dict(hyperparams)))
    self.hyperparams = dict(hyperparams)


class Clock:

  def __init__(self):
    self.t = 1000.0

  def __call__(self):
    self.t += 1.0
    return self.t


def make(tmp_path, members, **kwargs):
  args = dict(population_size=len(members), ready_interval_frames=200, burn_in_frames=0, seed=5,
              exploit='truncation', exploit_threshold=0.0)
  args.update(kwargs)
  return Controller(PBTConfig(**args), members, str(tmp_path), HP, clock=Clock())


def test_exploit_copies_state_and_hyperparams_and_logs(tmp_path):
  members = [FakeMember(i) for i in range(4)]
  controller = make(tmp_path, members, perturb_probability=0.0)
  assert all(m.hyperparams is None for m in members)  # pushed at the first poll
  controller.step()  # frames 100: nobody is ready; hyperparameters are synced
  assert all(m.hyperparams == HP for m in members)
  assert controller.counters['exploits'] == 0
  events = controller.step()  # frames 200: ready; bottom member 0 copies top member 3
  assert [(e['event'], e['member'], e['donor']) for e in events] == [('exploit', 0, 3)]
  np.testing.assert_array_equal(members[0].params, members[3].params)
  np.testing.assert_array_equal(members[0].opt_state, members[3].opt_state)
  assert members[0].calls[-1][0] == 'set_state'
  lines = list(storage.read_jsonl(os.path.join(tmp_path, storage.EVENTS_FILE)))
  assert len(lines) == 1
  line = lines[0]
  assert line['member'] == 0 and line['donor'] == 3 and line['frames'] == 200
  assert line['fitness'] == 0.0 and line['donor_fitness'] == 0.3
  assert line['old_hyperparams'] == HP and line['new_hyperparams'] == HP
  record = controller.records[0]
  assert record.generation == 1 and [e['event'] for e in record.lineage] == ['init', 'exploit']
  assert record.lineage[0]['member'] == 3  # the weights descend from member 3
  assert record.fitness is None and record.last_change_frames == 200
  assert controller.step() == []  # 300: only 100 frames since the last change for everyone


def test_explore_changes_hyperparams_without_touching_params(tmp_path):
  members = [FakeMember(i) for i in range(2)]
  controller = make(tmp_path, members, exploit='impala', exploit_threshold=10.0, perturb_probability=1.0,
                    explore_without_exploit=True)
  controller.step()
  events = controller.step()
  assert [e['event'] for e in events] == ['explore', 'explore']
  for member, event in zip(members, events):
    assert member.hyperparams == event['new_hyperparams'] != HP
    assert member.calls[-1][0] == 'set_hyperparams'
    assert all(event['new_hyperparams'][k] / HP[k] in (pytest.approx(1.2), pytest.approx(1 / 1.2))
               for k in HP)
  np.testing.assert_array_equal(members[0].params, np.zeros(3))


def test_exploit_then_explore_perturbs_the_copied_hyperparams(tmp_path):
  members = [FakeMember(i) for i in range(2)]
  controller = make(tmp_path, members, exploit='impala', perturb_probability=1.0)
  controller.step()
  events = controller.step()
  kinds = [(e['event'], e['member']) for e in events]
  assert kinds == [('exploit', 0), ('explore', 0)]
  assert events[1]['old_hyperparams'] == HP  # donor's values, then perturbed
  assert members[0].calls[-1] == ('set_state', events[1]['new_hyperparams'])
  assert [e['event'] for e in controller.records[0].lineage] == ['init', 'exploit', 'explore']


def test_resume_keeps_lineage_counters_and_random_stream(tmp_path):
  kwargs = dict(exploit='impala', perturb_probability=0.5, ready_interval_frames=100)
  # Uninterrupted reference run.
  ref_members = [FakeMember(i) for i in range(4)]
  ref = make(tmp_path / 'ref', ref_members, **kwargs)
  for _ in range(8):
    ref.step()
  # Same run, with the controller process replaced half way (the learners keep running).
  members = [FakeMember(i) for i in range(4)]
  first = make(tmp_path / 'run', members, **kwargs)
  for _ in range(4):
    first.step()
  saved = json.load(open(first.state_path))
  lineage_before = [r.lineage for r in first.records]
  del first
  second = make(tmp_path / 'run', members, **kwargs)
  assert second.restored and second.counters['restarts'] == 1
  assert [r.lineage for r in second.records] == lineage_before
  assert second.counters['exploits'] == saved['counters']['exploits']
  for _ in range(4):
    second.step()
  strip = lambda events: [{k: v for k, v in e.items() if k != 'time'} for e in events]
  ref_events = strip(storage.read_jsonl(ref.events_path))
  run_events = strip(storage.read_jsonl(second.events_path))
  assert run_events == ref_events and len(ref_events) > 0
  assert [r.hyperparams for r in second.records] == [r.hyperparams for r in ref.records]
  assert ([[{k: v for k, v in e.items() if k != 'time'} for e in r.lineage] for r in second.records] ==
          [[{k: v for k, v in e.items() if k != 'time'} for e in r.lineage] for r in ref.records])
  # After a restart the controller pushes its hyperparameters to every member again.
  assert all(m.calls and m.hyperparams == r.hyperparams for m, r in zip(members, second.records))


def test_resume_with_other_population_size_fails(tmp_path):
  make(tmp_path, [FakeMember(i) for i in range(2)])
  with pytest.raises(ValueError, match='population_size'):
    make(tmp_path, [FakeMember(i) for i in range(3)])


def test_unreachable_member_is_skipped(tmp_path):

  class Down(FakeMember):

    def get_fitness(self):
      raise TimeoutError('deadline exceeded')

    def set_hyperparams(self, hyperparams):
      raise TimeoutError('deadline exceeded')

  members = [FakeMember(0), Down(1), FakeMember(2)]
  controller = make(tmp_path, members, exploit='impala', perturb_probability=0.0)
  controller.step()
  controller.step()
  assert controller.records[1].frames == 0 and controller.records[1].fitness is None
  assert controller.counters['exploits'] == 1  # member 0 copied member 2 (member 1 has no fitness)
  np.testing.assert_array_equal(members[0].params, members[2].params)


def test_state_file_is_valid_json_after_every_step(tmp_path):
  controller = make(tmp_path, [FakeMember(i) for i in range(3)], exploit='impala')
  for _ in range(5):
    controller.step()
    state = json.load(open(controller.state_path))
    assert state['counters']['polls'] == controller.counters['polls']
    assert not [f for f in os.listdir(tmp_path) if f.startswith('.')]  # no temp files left


def test_done_members_stop_evolving_and_end_the_run(tmp_path):
  members = [FakeMember(i) for i in range(2)]
  controller = make(tmp_path, members, exploit='impala')
  original = members[1].get_fitness
  members[1].get_fitness = lambda: dict(original(), done=True)
  controller.step()
  events = controller.step()
  assert all(e['member'] == 0 for e in events)  # the finished member is never changed
  assert not controller.all_done()
  members[0].get_fitness = lambda: {'frames': 10**6, 'fitness': 0.0, 'num_episodes': 1, 'done': True}
  controller.run(lambda: False, max_rounds=10, sleep=lambda s: None)
  assert controller.all_done() and controller.counters['polls'] == 3  # run returned at once
