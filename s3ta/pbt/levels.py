"""Named game lists for multi-level training, and the round-robin actor → game assignment.

Names are EnvPool's Atari task names without the '-v5' suffix. Multi-level agents
use the full 18-action Atari space so that one network serves every game.
"""

from typing import Sequence

from s3ta.envs.atari import ATARI_GAMES

# The 57 games of the Atari-57 benchmark (Mnih et al. 2015 + Badia et al. 2020 set).
ATARI_57 = ATARI_GAMES

GAME_LISTS = {
    'atari57': ATARI_57,
    # Small subsets for smoke tests and quick sweeps.
    'atari2': ('Breakout', 'Pong'),
    'atari3': ('Breakout', 'Pong', 'SpaceInvaders'),
    # The games the paper's attention analysis shows (000, §4).
    'atari_paper': ('Breakout', 'Seaquest', 'SpaceInvaders', 'StarGunner', 'MsPacman', 'Enduro'),
}


def resolve_games(value) -> tuple:
  """A list name from GAME_LISTS, a comma-separated string, or a sequence of games."""
  if isinstance(value, str):
    if value in GAME_LISTS:
      return tuple(GAME_LISTS[value])
    games = tuple(g.strip() for g in value.split(',') if g.strip())
  else:
    games = tuple(value)
  if not games:
    raise ValueError(f'Empty game list {value!r}; name one of {sorted(GAME_LISTS)} or list games.')
  unknown = [g for g in games if g not in ATARI_57]
  if unknown:
    raise ValueError(f'Unknown Atari game(s) {unknown}; valid games are the Atari-57 names '
                     f'(e.g. {ATARI_57[:3]}) or a list name from {sorted(GAME_LISTS)}.')
  return games


def assign_games(num_actors: int, games: Sequence[str]) -> list:
  """Round-robin: actor i plays games[i % len(games)]."""
  if num_actors < len(games):
    raise ValueError(f'{num_actors} actors cannot cover {len(games)} games; use at least one actor per game.')
  return [games[i % len(games)] for i in range(num_actors)]
