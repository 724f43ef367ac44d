"""Human-normalised Atari scores, checked by hand."""

import pytest

from s3ta.envs import human_scores as hs


def test_reference_scores_by_hand():
  assert hs.reference_scores('Pong') == (-20.7, 14.6)
  assert hs.reference_scores('MontezumaRevenge') == (0.0, 4753.3)
  assert len(hs.SCORES) == 57
  assert all(ref.human > ref.random for ref in hs.SCORES.values())


def test_human_normalized_score_by_hand():
  assert hs.human_normalized_score('Pong', 14.6) == pytest.approx(1.0)
  assert hs.human_normalized_score('Pong', -20.7) == pytest.approx(0.0)
  assert hs.human_normalized_score('Pong', 21.0) == pytest.approx(41.7 / 35.3)  # ~1.181
  # Breakout: random 1.7, human 30.5 -> (400 - 1.7) / 28.8 = 13.8299
  assert hs.human_normalized_score('Breakout', 400) == pytest.approx(398.3 / 28.8)
  # Skiing has negative scores: random -17098.1, human -4336.9.
  assert hs.human_normalized_score('Skiing', -10717.5) == pytest.approx(0.5)


def test_aggregates():
  scores = {'Pong': 21.0, 'Breakout': 1.7, 'MontezumaRevenge': 2376.65}  # 1.1813, 0.0, 0.5
  assert hs.mean_normalized(scores) == pytest.approx((41.7 / 35.3 + 0.0 + 0.5) / 3)
  assert hs.median_normalized(scores) == pytest.approx(0.5)
  assert hs.capped_mean_normalized(scores) == pytest.approx((1.0 + 0.0 + 0.5) / 3)
  assert hs.capped_mean_normalized({'Breakout': 400}) == 1.0
  assert hs.median_normalized({'Pong': -20.7, 'Breakout': 30.5}) == pytest.approx(0.5)


def test_validation():
  with pytest.raises(ValueError, match=r"'Pong-v5'.*valid games: Alien.*Zaxxon"):
    hs.human_normalized_score('Pong-v5', 0.0)
  with pytest.raises(ValueError, match='at least one game'):
    hs.mean_normalized({})
