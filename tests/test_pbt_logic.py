"""Pure PBT rules: readiness, exploit (truncation, IMPALA), explore, fitness, configs."""

import math

import numpy as np
import pytest

from s3ta.pbt import levels
from s3ta.pbt import population as pop
from s3ta.pbt.config import PBTConfig
from s3ta.pbt.fitness import FitnessTracker

HP = {'learning_rate': 2e-4, 'entropy_cost': 0.01, 'rmsprop_epsilon': 0.01, 'grad_clip': 1280.0}


def records(fitnesses, frames=100):
  return [pop.MemberRecord(member_id=i, hyperparams=dict(HP), frames=frames, fitness=f, num_episodes=5)
          for i, f in enumerate(fitnesses)]


def config(**kwargs):
  defaults = dict(population_size=2, ready_interval_frames=10, burn_in_frames=0)
  defaults.update(kwargs)
  return PBTConfig(**defaults)


# ---- readiness ---------------------------------------------------------------------------


def test_ready_needs_burn_in_interval_and_fitness():
  cfg = config(burn_in_frames=100, ready_interval_frames=50)
  r = pop.MemberRecord(member_id=0, hyperparams=dict(HP), frames=99, fitness=0.1, num_episodes=1)
  assert not pop.is_ready(r, cfg)  # before burn-in
  r.frames = 100
  assert pop.is_ready(r, cfg)
  r.last_change_frames = 60
  assert not pop.is_ready(r, cfg)  # only 40 frames since the last change
  r.frames = 110
  assert pop.is_ready(r, cfg)
  r.fitness = None
  assert not pop.is_ready(r, cfg)  # no fitness yet


# ---- truncation ----------------------------------------------------------------------------


def test_truncation_single_top_member_is_the_donor():
  # 4 members, fraction 0.25 -> bottom 1 copies top 1: member 2 (0.1) <- member 1 (0.9).
  recs = records([0.5, 0.9, 0.1, 0.3])
  cfg = config(population_size=4, exploit='truncation', exploit_threshold=0.0)
  donors = pop.choose_donors(recs, [0, 1, 2, 3], cfg, np.random.default_rng(0))
  assert donors == {2: 1}


def test_truncation_known_donors_with_seed():
  fitnesses = [0.8, 0.1, 0.7, 0.2, 0.6, 0.3, 0.5, 0.4]  # bottom 2: {1, 3}; top 2: {0, 2}
  recs = records(fitnesses)
  cfg = config(population_size=8, exploit='truncation', truncation_fraction=0.25, exploit_threshold=0.0)
  donors = pop.choose_donors(recs, list(range(8)), cfg, np.random.default_rng(7))
  rng = np.random.default_rng(7)  # the same draws, by hand: recipients in id order, top sorted by id
  expected = {1: [0, 2][int(rng.integers(2))], 3: [0, 2][int(rng.integers(2))]}
  assert donors == expected
  assert set(donors) == {1, 3} and set(donors.values()) <= {0, 2}


def test_truncation_only_ready_bottom_members_copy_and_respect_threshold():
  recs = records([0.5, 0.9, 0.1, 0.3])
  cfg = config(population_size=4, exploit='truncation', exploit_threshold=0.0)
  assert pop.choose_donors(recs, [0, 1, 3], cfg, np.random.default_rng(0)) == {}  # 2 not ready
  cfg = config(population_size=4, exploit='truncation', exploit_threshold=0.8)  # 0.9 - 0.1 = 0.8, not >
  assert pop.choose_donors(recs, [0, 1, 2, 3], cfg, np.random.default_rng(0)) == {}


def test_truncation_ignores_members_without_fitness():
  recs = records([None, 0.9, 0.1, None])
  cfg = config(population_size=4, exploit='truncation', exploit_threshold=0.0)
  assert pop.choose_donors(recs, [1, 2], cfg, np.random.default_rng(0)) == {2: 1}


# ---- IMPALA ----------------------------------------------------------------------------------


def test_impala_copies_only_when_better_by_more_than_threshold():
  cfg = config(exploit='impala', exploit_threshold=0.25)
  rng = np.random.default_rng(0)
  assert pop.choose_donors(records([0.5, 0.76]), [0, 1], cfg, rng) == {0: 1}  # 0.26 > 0.25
  assert pop.choose_donors(records([0.5, 0.75]), [0, 1], cfg, rng) == {}  # exactly 0.25: not more
  assert pop.choose_donors(records([0.5, 0.7]), [0, 1], cfg, rng) == {}
  assert pop.choose_donors(records([0.9, 0.1]), [0, 1], cfg, rng) == {1: 0}
  # The default threshold is IMPALA's 5 % (absolute, in human-normalised units).
  default = config()
  assert default.exploit_threshold == 0.05
  assert pop.choose_donors(records([0.50, 0.56]), [0, 1], default, rng) == {0: 1}
  assert pop.choose_donors(records([0.50, 0.54]), [0, 1], default, rng) == {}


def test_impala_compares_with_a_seeded_random_other_member():
  fitnesses = [0.0, 1.0, 2.0, 3.0, 4.0]
  cfg = config(population_size=5, exploit='impala', exploit_threshold=0.05)
  donors = pop.choose_donors(records(fitnesses), [0, 4], cfg, np.random.default_rng(3))
  rng = np.random.default_rng(3)
  other0 = [1, 2, 3, 4][int(rng.integers(4))]
  _ = [0, 1, 2, 3][int(rng.integers(4))]  # member 4 is the best: never copies
  assert donors == {0: other0}
  # Over many seeds member 0 meets every other member about equally often.
  counts = np.zeros(5)
  for seed in range(2000):
    counts[pop.choose_donors(records(fitnesses), [0], cfg, np.random.default_rng(seed))[0]] += 1
  assert counts[0] == 0 and np.all(np.abs(counts[1:] / 2000 - 0.25) < 0.05)


# ---- explore ---------------------------------------------------------------------------------


def test_perturb_stays_within_bounds():
  bounds = {'learning_rate': (1e-4, 3e-4), 'entropy_cost': (0.009, 0.011),
            'rmsprop_epsilon': (0.01, 0.01), 'grad_clip': (1000.0, 1500.0)}
  cfg = config(perturb_probability=1.0, bounds=bounds)
  rng = np.random.default_rng(0)
  hp = dict(HP)
  for _ in range(2000):
    hp = pop.perturb(hp, cfg, rng)
    for name, (low, high) in bounds.items():
      assert low <= hp[name] <= high, (name, hp[name])
  assert hp['rmsprop_epsilon'] == 0.01


def test_perturb_frequency_is_one_third_each_way_one_sixth():
  cfg = config(evolve=('learning_rate',), bounds={'learning_rate': (1e-9, 1.0)})
  assert math.isclose(cfg.perturb_probability, 1 / 3) and cfg.perturb_factor == 1.2
  rng = np.random.default_rng(123)
  n = 30_000
  up = down = same = 0
  for _ in range(n):
    new = pop.perturb(HP, cfg, rng)['learning_rate']
    if math.isclose(new, HP['learning_rate'] * 1.2):
      up += 1
    elif math.isclose(new, HP['learning_rate'] / 1.2):
      down += 1
    else:
      assert new == HP['learning_rate']
      same += 1
  # 5 standard deviations of a binomial proportion: false-failure odds < 1e-6.
  sigma = math.sqrt((1 / 3) * (2 / 3) / n)
  assert abs((up + down) / n - 1 / 3) < 5 * sigma
  sigma6 = math.sqrt((1 / 6) * (5 / 6) / n)
  assert abs(up / n - 1 / 6) < 5 * sigma6 and abs(down / n - 1 / 6) < 5 * sigma6


def test_perturb_touches_only_evolved_names():
  cfg = config(evolve=('entropy_cost',), perturb_probability=1.0)
  new = pop.perturb(HP, cfg, np.random.default_rng(0))
  assert new['entropy_cost'] != HP['entropy_cost']
  assert {k: v for k, v in new.items() if k != 'entropy_cost'} == {
      k: v for k, v in HP.items() if k != 'entropy_cost'}


def test_initial_hyperparams_log_uniform_in_range_and_seeded():
  cfg = config(population_size=16)
  ranges = {'learning_rate': (1e-5, 5e-3)}
  a = pop.initial_hyperparams(cfg, HP, ranges, np.random.default_rng(1))
  b = pop.initial_hyperparams(cfg, HP, ranges, np.random.default_rng(1))
  assert a == b and len(a) == 16
  assert all(1e-5 <= m['learning_rate'] <= 5e-3 and m['entropy_cost'] == 0.01 for m in a)
  assert len({m['learning_rate'] for m in a}) == 16


def test_inherit_copies_lineage_and_hyperparams():
  donor = pop.MemberRecord(member_id=1, hyperparams={'learning_rate': 1.0}, generation=2,
                           lineage=[{'event': 'init', 'member': 1}])
  recipient = pop.MemberRecord(member_id=0, hyperparams={'learning_rate': 2.0},
                               lineage=[{'event': 'init', 'member': 0}])
  pop.inherit(recipient, donor, {'event': 'exploit', 'member': 0, 'donor': 1})
  assert recipient.hyperparams == {'learning_rate': 1.0} and recipient.generation == 3
  assert [e['event'] for e in recipient.lineage] == ['init', 'exploit']
  assert recipient.lineage[0]['member'] == 1
  recipient.lineage.append({'event': 'explore'})
  assert len(donor.lineage) == 1  # a deep copy


# ---- configs -----------------------------------------------------------------------------------


@pytest.mark.parametrize('kwargs, message', [
    (dict(population_size=1), 'population_size'),
    (dict(evolve=('learning_rate', 'momentum')), "'momentum'"),
    (dict(ready_interval_frames=0), 'ready_interval_frames'),
    (dict(ready_interval_frames=-5), 'ready_interval_frames'),
    (dict(exploit='tournament'), "'tournament'"),
    (dict(perturb_factor=1.0), 'perturb_factor'),
    (dict(bounds={'learning_rate': (1.0, 0.1)}), 'learning_rate'),
    (dict(bounds={'lr': (1.0, 2.0)}), "'lr'"),
])
def test_bad_configs_raise_value_error_naming_the_field(kwargs, message):
  args = dict(population_size=2)
  args.update(kwargs)
  with pytest.raises(ValueError, match=message):
    PBTConfig(**args)


def test_from_dict_rejects_unknown_fields():
  with pytest.raises(ValueError, match='populaton_size'):
    PBTConfig.from_dict({'populaton_size': 4})


# ---- fitness and levels -------------------------------------------------------------------------


def test_fitness_is_mean_over_games_of_capped_scores():
  # Normaliser: score / 10 (so 1.0 = human at 10 points).
  tracker = FitnessTracker(window=3, normalizer=lambda game, r: r / 10.0)
  assert tracker.fitness() is None
  for r in (5.0, 30.0):  # game A: 0.5 and 3.0 -> capped 0.5, 1.0 -> 0.75
    tracker.add('A', r)
  for r in (0.0, 1.0, 2.0, 3.0):  # game B window 3: 0.1, 0.2, 0.3 -> 0.2
    tracker.add('B', r)
  assert tracker.num_episodes == 5
  assert math.isclose(tracker.fitness(), (0.75 + 0.2) / 2)
  per_game = tracker.per_game()
  assert math.isclose(per_game['A']['mean_hns'], 1.75) and per_game['B']['mean_return'] == 2.0
  tracker.reset()
  assert tracker.fitness() is None and tracker.num_episodes == 0


def test_game_lists_and_round_robin():
  assert len(levels.ATARI_57) == 57 == len(set(levels.ATARI_57))
  assert levels.resolve_games('atari57') == levels.ATARI_57
  assert levels.resolve_games('Pong,Breakout') == ('Pong', 'Breakout')
  assert levels.assign_games(5, ('A', 'B')) == ['A', 'B', 'A', 'B', 'A']
  with pytest.raises(ValueError, match='Pongg'):
    levels.resolve_games('Pongg')
  with pytest.raises(ValueError, match='3 games'):
    levels.assign_games(2, ('A', 'B', 'C'))
