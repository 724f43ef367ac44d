"""Why a T-maze agent scores below the optimum: its episodes' event tallies, from a checkpoint.

`python -m s3ta.analysis tmaze-events --checkpoint=DIR --out=OUT [--episodes=20] [--greedy]`
plays the run's agent on its own T-maze (rebuilt from the checkpoint's config; all episodes
in parallel, each `max_steps` long) and counts, per episode, what its steps did
(s3ta/envs/tmaze.py `EVENTS`): moves, moves blocked by a wall, no-ops, rewards, the two
memory mistakes of paper 002 (`wrong_side`: the reward corner entered from its side column;
`wrong_corner`: the wrong corner chosen at the top), neutral corner entries and corner
entries while the maze is disarmed after a mistake, moves straight back (`reversal`), and the
longest run of steps in place. A memory failure shows as mistakes; an agent that remembers
but walks badly shows as blocked moves, reversals and detours. A greedy policy that sees only
its last views (the attention agent) can stall for good: a blocked move leaves the view
unchanged, so once its window holds nothing else its input, and so its action, never change.
Moves down the centre column (`centre_down`) show the T route: back from the corner along
the top row, down the centre and up again, as short as the figure 8 under `route='any'` but
needing the direction of travel in the centre column, where the figure 8 only goes up.
Output: `tmaze_events.csv` (one row per episode), `tmaze_blocked.csv` and
`tmaze_reversals.csv` (blocked moves and reversals per cell and direction, summed over the
episodes) and `tmaze_places.png` (both per cell, per episode).
"""

import csv
import os
import textwrap

import numpy as np

from s3ta.analysis import render
from s3ta.analysis.rollout import AgentRunner, restore_agent, trained_env_config
from s3ta.envs import factory, tmaze


def _maze_batch(env) -> tmaze.BatchedTMaze:
  """The BatchedTMaze inside the factory's wrappers (frame stack, split step)."""
  while not isinstance(env, tmaze.BatchedTMaze):
    env = env.env
  return env


def play(checkpoint: str, episodes: int, seed: int = 0, greedy: bool = False):
  """(rows, places, description): per-episode event tallies and returns, and
  {'blocked': ..., 'reversed': ...}, the blocked moves and reversals per (x, y, action)
  summed over the episodes, of `episodes` episodes played in parallel."""
  env_config = trained_env_config(checkpoint)
  if factory.env_name(env_config) != 'tmaze':
    raise ValueError(f'tmaze-events plays the T-maze; this checkpoint was trained on '
                     f'{factory.env_name(env_config)!r}.')
  env = factory.make_env(env_config, episodes, seed)
  try:
    agent = restore_agent(checkpoint, env.num_actions, env.observation_shape)
    mazes = _maze_batch(env)
    runner = AgentRunner(agent, env, seed=seed, greedy=greedy)
    returns = np.zeros(episodes)
    for _ in range(mazes.max_steps):
      _, step = runner.step_batch()
      returns += step.reward
    finished = mazes.pop_finished_episodes()
  finally:
    env.close()
  rows, places = [], {'blocked': {}, 'reversed': {}}
  for episode in sorted(finished, key=lambda episode: episode.maze):
    rows.append(dict(episode=episode.maze, episode_return=float(returns[episode.maze]),
                     **{event: int(episode.events[event]) for event in tmaze.EVENTS},
                     longest_stall=episode.longest_stall))
    for name, counts in (('blocked', episode.blocked_at), ('reversed', episode.reversed_at)):
      for key, count in counts.items():
        places[name][key] = places[name].get(key, 0) + count
  return rows, places, agent.description


def summary(rows: list[dict]) -> dict:
  """Mean return and mean count of every event per episode."""
  return {key: float(np.mean([row[key] for row in rows]))
          for key in ('episode_return',) + tmaze.EVENTS + ('longest_stall',)}


PLACE_FILES = (('blocked', 'tmaze_blocked.csv', 'blocked_moves', 'blocked moves'),
               ('reversed', 'tmaze_reversals.csv', 'reversals', 'reversals (moves straight back)'))


def write(rows: list[dict], places: dict, out: str, title: str) -> list[str]:
  """The per-episode CSV, the per-cell CSVs (blocked moves, reversals) and their picture."""
  os.makedirs(out, exist_ok=True)
  events_path = os.path.join(out, 'tmaze_events.csv')
  with open(events_path, 'w', newline='') as f:
    writer = csv.DictWriter(f, list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  paths = [events_path]
  walkable = tmaze.walkable()
  plt = render.pyplot()
  fig, axes = plt.subplots(1, len(PLACE_FILES), figsize=(10.4, 4.4))
  for ax, (name, filename, column, label) in zip(axes, PLACE_FILES):
    paths.append(os.path.join(out, filename))
    with open(paths[-1], 'w', newline='') as f:
      writer = csv.writer(f)
      writer.writerow(['x', 'y', 'move', column])
      for (x, y, action), count in sorted(places[name].items(), key=lambda item: -item[1]):
        writer.writerow([x, y, tmaze.MOVE_NAMES[action], count])
    grid = np.full((tmaze.HEIGHT, tmaze.WIDTH), np.nan)
    grid[walkable] = 0.0
    for (x, y, _), count in places[name].items():
      grid[y, x] += count / len(rows)
    image = ax.imshow(grid, cmap='magma_r', vmin=0.0)
    top = np.nanmax(grid)
    for y, x in zip(*np.nonzero(walkable)):
      ax.text(x, y, f'{grid[y, x]:.1f}', ha='center', va='center', fontsize=7,
              color='white' if grid[y, x] > 0.6 * top > 0 else 'black')
    ax.set_xticks(range(tmaze.WIDTH))
    ax.set_yticks(range(tmaze.HEIGHT))
    ax.set_facecolor('0.3')  # walls
    fig.colorbar(image, ax=ax, fraction=0.046, label=f'{label} per episode, from the cell')
  fig.suptitle('\n'.join(textwrap.wrap(title, 120)), fontsize=7)
  fig.tight_layout()
  paths.append(os.path.join(out, 'tmaze_places.png'))
  fig.savefig(paths[-1], dpi=110)
  plt.close(fig)
  return paths
