"""Random and human reference scores of the 57 Atari games, and human-normalised scores.

Source: the standard table of Mnih et al. 2015, "Human-level control through deep
reinforcement learning" (Nature), extended to all 57 games and reprinted in Badia
et al. 2020, "Agent57: Outperforming the Atari Human Benchmark", Appendix H
(the same numbers as DeepMind's DQN Zoo `atari_data.py`). Video Pinball uses
Agent57's random score 0.0; Mnih et al. 2015 list 16 256.9, which DQN Zoo keeps.

human_normalized_score = (score - random) / (human - random): 0 is random play,
1 is the human tester. The paper's PBT fitness (000, A.2) is the capped mean,
min(score, 1) averaged over games.
"""

from typing import Mapping, NamedTuple

import numpy as np


class ReferenceScores(NamedTuple):
  random: float
  human: float


# Keys are EnvPool game names (task '<name>-v5').
SCORES: Mapping[str, ReferenceScores] = {
    name: ReferenceScores(random, human) for name, random, human in (
        ('Alien', 227.8, 7127.7),
        ('Amidar', 5.8, 1719.5),
        ('Assault', 222.4, 742.0),
        ('Asterix', 210.0, 8503.3),
        ('Asteroids', 719.1, 47388.7),
        ('Atlantis', 12850.0, 29028.1),
        ('BankHeist', 14.2, 753.1),
        ('BattleZone', 2360.0, 37187.5),
        ('BeamRider', 363.9, 16926.5),
        ('Berzerk', 123.7, 2630.4),
        ('Bowling', 23.1, 160.7),
        ('Boxing', 0.1, 12.1),
        ('Breakout', 1.7, 30.5),
        ('Centipede', 2090.9, 12017.0),
        ('ChopperCommand', 811.0, 7387.8),
        ('CrazyClimber', 10780.5, 35829.4),
        ('Defender', 2874.5, 18688.9),
        ('DemonAttack', 152.1, 1971.0),
        ('DoubleDunk', -18.6, -16.4),
        ('Enduro', 0.0, 860.5),
        ('FishingDerby', -91.7, -38.7),
        ('Freeway', 0.0, 29.6),
        ('Frostbite', 65.2, 4334.7),
        ('Gopher', 257.6, 2412.5),
        ('Gravitar', 173.0, 3351.4),
        ('Hero', 1027.0, 30826.4),
        ('IceHockey', -11.2, 0.9),
        ('Jamesbond', 29.0, 302.8),
        ('Kangaroo', 52.0, 3035.0),
        ('Krull', 1598.0, 2665.5),
        ('KungFuMaster', 258.5, 22736.3),
        ('MontezumaRevenge', 0.0, 4753.3),
        ('MsPacman', 307.3, 6951.6),
        ('NameThisGame', 2292.3, 8049.0),
        ('Phoenix', 761.4, 7242.6),
        ('Pitfall', -229.4, 6463.7),
        ('Pong', -20.7, 14.6),
        ('PrivateEye', 24.9, 69571.3),
        ('Qbert', 163.9, 13455.0),
        ('Riverraid', 1338.5, 17118.0),
        ('RoadRunner', 11.5, 7845.0),
        ('Robotank', 2.2, 11.9),
        ('Seaquest', 68.4, 42054.7),
        ('Skiing', -17098.1, -4336.9),
        ('Solaris', 1236.3, 12326.7),
        ('SpaceInvaders', 148.0, 1668.7),
        ('StarGunner', 664.0, 10250.0),
        ('Surround', -10.0, 6.5),
        ('Tennis', -23.8, -8.3),
        ('TimePilot', 3568.0, 5229.2),
        ('Tutankham', 11.4, 167.6),
        ('UpNDown', 533.4, 11693.2),
        ('Venture', 0.0, 1187.5),
        ('VideoPinball', 0.0, 17667.9),
        ('WizardOfWor', 563.5, 4756.5),
        ('YarsRevenge', 3092.9, 54576.9),
        ('Zaxxon', 32.5, 9173.3),
    )
}


def reference_scores(game: str) -> ReferenceScores:
  """(random, human) scores of `game`; ValueError naming the valid games if it has none."""
  if game not in SCORES:
    raise ValueError(f'No reference scores for game {game!r}; valid games: {", ".join(SCORES)}.')
  return SCORES[game]


def human_normalized_score(game: str, score: float) -> float:
  """(score - random) / (human - random) for `game`'s reference scores."""
  ref = reference_scores(game)
  return (float(score) - ref.random) / (ref.human - ref.random)


def _normalized(scores: Mapping[str, float]) -> np.ndarray:
  if not scores:
    raise ValueError('Need the scores of at least one game, got none.')
  return np.array([human_normalized_score(game, s) for game, s in scores.items()], np.float64)


def mean_normalized(scores: Mapping[str, float]) -> float:
  """Mean human-normalised score over {game: raw score}."""
  return float(np.mean(_normalized(scores)))


def median_normalized(scores: Mapping[str, float]) -> float:
  """Median human-normalised score over {game: raw score}."""
  return float(np.median(_normalized(scores)))


def capped_mean_normalized(scores: Mapping[str, float], cap: float = 1.0) -> float:
  """Mean of min(human-normalised score, cap) over {game: raw score}; cap 1.0 = 100 % human."""
  return float(np.mean(np.minimum(_normalized(scores), cap)))
