"""Attention maps of the feature agents (papers 002 and 003), labelled, from a checkpoint.

`python -m s3ta.analysis feature-attention --checkpoint=DIR --out=OUT [--steps=200]` plays
the run's own environment (RAM-feature Atari or the T-maze, rebuilt from the checkpoint's
config) with its agent and writes, per head:
- g-AWRL (`gawrl`): the first layer's [L, L] map averaged over the steps, rows and
  columns labelled `feature@t-k` (003 Fig. 3B);
- d-AWRL (`dawrl`): the selection weight of every token, averaged (003 Fig. 3A);
- attention over time (`time_attention`): the weight of each past view at every step,
  rows = steps, columns = views from oldest to newest (002 Fig. 6).
Output: `feature_attention.png` and `feature_attention.csv` (the averaged maps, labelled).
For the RAM-feature agents, `feature_mass.csv` sums each feature's T tokens: per head, the
mass the feature receives from an average query, its lift over a uniform map (mass x F), and
its std over the steps (how much the map follows the observation: 0 when attention is
conditioned on address only, 003 Experiment 3). When the observation carries irrelevant
features (002's random bytes `random_i`, 003's distractor games `distractorD_*`),
`irrelevant_mass.csv` gives per head the mass on all of them together against their share
of a uniform map (002's claim: attention selects the relevant features over the noise).
For the T-maze, `reward_attention.csv` adds 002's Fig. 6 test: per head, the attention mass
on the past views that show the collectible reward, against those views' share of the window
(lift > 1: the head looks at the reward's sightings more than at other views), and 002's
sharper claim ("all heads highlight the first observation of the most recent reward
object"): the weight on the first view of the latest run of sightings, against 1/T
(`latest_lift`).
"""

import csv
import os
from typing import Optional

import jax
import numpy as np

from s3ta.acting.actor_core import agent_input
from s3ta.analysis import render
from s3ta.analysis.rollout import restore_agent, trained_env_config
from s3ta.envs import factory
from s3ta.envs.atari_ram import IRRELEVANT_PREFIXES

KINDS = ('gawrl', 'dawrl', 'time_attention')


def token_labels(env, kind: str, observation_shape) -> list[str]:
  """Names of the attended items: `feature@t-k` tokens, or `t-k` past views."""
  if kind == 'time_attention':
    steps = observation_shape[-1] // 3
    return [f't-{steps - 1 - i}' for i in range(steps)]
  names = getattr(env, 'feature_names', None) or [f'f{i}' for i in range(observation_shape[0])]
  history = observation_shape[1]
  return [f'{name}@t-{history - 1 - t}' for name in names for t in range(history)]


def reward_views(observation: np.ndarray) -> np.ndarray:
  """[views] bool: which stacked T-maze views (3 channels each, oldest first) show a reward."""
  height, width, channels = observation.shape
  return observation.reshape(height, width, channels // 3, 3)[..., 1].any(axis=(0, 1))


def latest_sighting_start(past: np.ndarray) -> np.ndarray:
  """[steps] index of the first view of the newest run of True in each row of `past` (-1: none)."""
  index = np.arange(past.shape[1])
  last = past.shape[1] - 1 - np.argmax(past[:, ::-1], axis=1)  # newest sighting
  gap = np.where(~past & (index <= last[:, None]), index, -1).max(axis=1)  # last view without
  return np.where(past.any(axis=1), gap + 1, -1)


def reward_attention(maps: np.ndarray, shown: np.ndarray) -> list[dict]:
  """Per head: mean attention mass on reward-showing views against their mean share of the
  window (`lift`), and the weight on the first view of the latest sighting against 1/T
  (`latest_lift`).

  `maps` [steps, heads, views], `shown` [steps, views]; only steps whose window holds a
  reward sighting count, and the newest view is left out (it is the query's own view).
  """
  past = shown[:, :-1]
  keep = past.any(axis=1)
  views = shown.shape[1]
  share = past[keep].sum(axis=1).mean() / views if keep.any() else float('nan')
  first = latest_sighting_start(past[keep])
  rows = []
  for head in range(maps.shape[1]):
    kept = maps[keep, head]
    mass = (kept[:, :-1] * past[keep]).sum(axis=1).mean() if keep.any() else float('nan')
    latest = kept[np.arange(len(first)), first].mean() if keep.any() else float('nan')
    rows.append(dict(head=head, steps=int(keep.sum()), mass=float(mass), share=float(share),
                     lift=float(mass / share), latest_mass=float(latest),
                     latest_lift=float(latest * views)))
  return rows


def feature_mass(labels: list[str], maps: np.ndarray) -> list[dict]:
  """Per head and feature: mean mass over the steps, its lift over a uniform map, and its std.

  `labels` are `feature@t-k` token names; `maps` [steps, heads, L, L] (g-AWRL: the mass a
  token receives is averaged over the queries) or [steps, heads, L] (d-AWRL's selection).
  """
  received = maps.mean(axis=2) if maps.ndim == 4 else maps  # [steps, heads, L]
  features = [label.split('@')[0] for label in labels]
  names = list(dict.fromkeys(features))
  owner = np.array([[f == name for name in names] for f in features], np.float64)  # [L, F]
  mass = received @ owner  # [steps, heads, F]
  share = owner.mean(axis=0)  # a uniform map's mass on each feature's tokens
  mean, std = mass.mean(axis=0), mass.std(axis=0)
  return [dict(head=head, feature=name, mass=float(mean[head, i]),
               lift=float(mean[head, i] / share[i]), std_over_steps=float(std[head, i]))
          for head in range(mean.shape[0]) for i, name in enumerate(names)]


def irrelevant_mass(labels: list[str], feature_rows: list[dict]) -> list[dict]:
  """Per head, from `feature_mass` rows over `labels`' tokens: the mass on the irrelevant
  features together, their tokens' share of a uniform map, and the lift (mass / share; below
  1: the head looks away from them)."""
  share = np.mean([label.startswith(IRRELEVANT_PREFIXES) for label in labels])
  rows = []
  for head in sorted({r['head'] for r in feature_rows}):
    own = [r for r in feature_rows if r['head'] == head and r['feature'].startswith(IRRELEVANT_PREFIXES)]
    mass = sum(r['mass'] for r in own)
    rows.append(dict(head=head, features=len(own), mass=mass, share=float(share),
                     lift=mass / share if share else float('nan')))
  return rows


def record(checkpoint: str, steps: int, seed: int = 0, greedy: bool = False):
  """(kind, labels, maps [steps, heads, ...], returns, shown) of `steps` steps of the run's agent.

  `shown` [steps, views] marks the T-maze views that show a reward (None for other agents).
  """
  env_config = trained_env_config(checkpoint)
  env = factory.make_env(env_config, 1, seed)
  try:
    agent = restore_agent(checkpoint, env.num_actions, env.observation_shape)
    kind = agent.network.config.kind
    if kind not in KINDS:
      raise ValueError(f'feature-attention shows the maps of {KINDS} agents; this checkpoint '
                       f'holds a {kind!r} network.')
    labels = token_labels(getattr(env, 'env', env), kind, env.observation_shape)
    step = jax.jit(agent.network.step)
    state = agent.network.initial_state(1)
    rng = jax.random.PRNGKey(seed)
    env_step, prev_action = env.reset(), np.zeros(1, np.int32)
    maps, returns, episode, shown = [], [], 0.0, []
    for _ in range(steps):
      if kind == 'time_attention':
        shown.append(reward_views(np.asarray(env_step.observation[0])))
      rng, key = jax.random.split(rng)
      inputs = agent_input(env_step, prev_action)
      outputs, state = step(agent.params, inputs, state)
      maps.append(np.asarray(outputs.attention[0]))
      logits = outputs.logits
      action = jax.numpy.argmax(logits, -1) if greedy else jax.random.categorical(key, logits)
      prev_action = np.asarray(action, np.int32)
      env_step = env.step(prev_action)
      episode += float(env_step.reward[0])
      if env_step.last[0]:
        returns.append(episode)
        episode = 0.0
    return kind, labels, np.stack(maps), returns, (np.stack(shown) if shown else None)
  finally:
    env.close()


def _write_rounded(path: str, rows: list[dict]) -> str:
  """`rows` as a CSV with their keys as the header and floats to 5 decimals; returns `path`."""
  with open(path, 'w', newline='') as f:
    writer = csv.DictWriter(f, list(rows[0]))
    writer.writeheader()
    writer.writerows({k: (f'{v:.5f}' if isinstance(v, float) else v) for k, v in row.items()}
                     for row in rows)
  return path


def write(kind: str, labels: list[str], maps: np.ndarray, out: str, title: str,
          shown: Optional[np.ndarray] = None) -> list[str]:
  """The PNG (one panel per head), the CSV of the step-averaged maps, and the per-feature
  mass CSV (RAM-feature agents) or the reward-view attention CSV (T-maze)."""
  os.makedirs(out, exist_ok=True)
  written = []
  if shown is not None:
    path = os.path.join(out, 'reward_attention.csv')
    with open(path, 'w', newline='') as f:
      writer = csv.DictWriter(f, ['head', 'steps', 'mass', 'share', 'lift', 'latest_mass',
                                  'latest_lift'])
      writer.writeheader()
      writer.writerows(reward_attention(maps, shown))
    written.append(path)
  if kind in ('gawrl', 'dawrl'):
    rows = feature_mass(labels, maps)
    written.append(_write_rounded(os.path.join(out, 'feature_mass.csv'), rows))
    if any(label.startswith(IRRELEVANT_PREFIXES) for label in labels):
      written.append(_write_rounded(os.path.join(out, 'irrelevant_mass.csv'),
                                    irrelevant_mass(labels, rows)))
  mean = maps.mean(axis=0)  # [heads, ...]
  csv_path = os.path.join(out, 'feature_attention.csv')
  with open(csv_path, 'w', newline='') as f:
    writer = csv.writer(f)
    if kind == 'gawrl':
      writer.writerow(['head', 'query'] + labels)
      for h, head in enumerate(mean):
        for label, row in zip(labels, head):
          writer.writerow([h, label] + [f'{v:.5f}' for v in row])
    else:
      writer.writerow(['head'] + labels)
      for h, head in enumerate(mean):
        writer.writerow([h] + [f'{v:.5f}' for v in head])
  plt = render.pyplot()
  heads = mean.shape[0]
  fig, axes = plt.subplots(1, heads, figsize=(3.6 * heads, 3.8), squeeze=False)
  for h in range(heads):
    ax = axes[0, h]
    if kind == 'gawrl':
      image = ax.imshow(mean[h], cmap='viridis', aspect='auto')
      ticks = np.arange(len(labels))
      ax.set_xticks(ticks, labels, rotation=90, fontsize=4)
      ax.set_yticks(ticks, labels, fontsize=4)
    elif kind == 'dawrl':
      image = ax.imshow(mean[h][:, None], cmap='viridis', aspect='auto')
      ax.set_yticks(np.arange(len(labels)), labels, fontsize=5)
      ax.set_xticks([])
    else:  # every step's map over the past views
      image = ax.imshow(maps[:, h], cmap='viridis', aspect='auto')
      ax.set_xlabel('past view (oldest left)', fontsize=7)
      ax.set_ylabel('step', fontsize=7)
    fig.colorbar(image, ax=ax, fraction=0.046)
    ax.set_title(f'head {h}', fontsize=8)
  fig.suptitle(title, fontsize=8)
  fig.tight_layout()
  png_path = os.path.join(out, 'feature_attention.png')
  fig.savefig(png_path, dpi=110)
  plt.close(fig)
  return [png_path, csv_path] + written
