"""Paper 004's views of an evolved AttentionAgent: top-K patch videos, the importance histogram,
and scores on the modified environments (004 Fig. 1, Fig. 6, Tables 3 and 4).

Every function takes an evolution checkpoint (`launch.evolve`'s workdir, its checkpoints/
directory, or one `es_*.pkl`) and plays the distribution's mean (`which='centre'`, the agent
004 reports), the best candidate seen in training (`which='best'`), or the mean that scored
best in the periodic evaluations (`which='best_eval'`, seeds disjoint from 0-99). Subcommands of
`python -m s3ta.analysis`: patch-video, patch-importance, generalisation.
"""

import csv
import dataclasses
import os
from typing import Any, NamedTuple, Optional, Sequence

import ml_collections
import numpy as np

from s3ta.analysis import render
from s3ta.envs import vision_tasks
from s3ta.evolution import cma_es, policy, rollouts

# --which -> checkpoint key: the distribution's mean now, the best candidate seen in training,
# the distribution's mean that scored best on the evaluation seeds (validation, not 0-99)
WHICH_KEYS = {'centre': 'centre', 'best': 'best_vector', 'best_eval': 'best_eval_vector'}
WHICH = tuple(WHICH_KEYS)
TOP_QUANTILE = 0.95  # 004 Fig. 6: importances in the top 5 % of each step's patches


class EvolvedAgent(NamedTuple):
  agent: policy.FlatAgent
  vector: np.ndarray
  config: Any  # the run's ConfigDict
  generation: int
  description: str


def checkpoint_path(path: str) -> str:
  """The newest `es_*.pkl` under a workdir or checkpoints dir, or `path` itself if it is one."""
  if os.path.isfile(path):
    return path
  for workdir in (path, os.path.dirname(path.rstrip('/'))):
    found = cma_es.list_checkpoints(workdir)
    if found:
      return found[-1][1]
  raise ValueError(f'no evolution checkpoint (checkpoints/es_*.pkl) in {path!r}; pass a '
                   'launch.evolve workdir or one of its es_*.pkl files.')


def load(path: str, which: str = 'centre') -> EvolvedAgent:
  if which not in WHICH:
    raise ValueError(f'--which must be one of {WHICH}, got {which!r}.')
  file = checkpoint_path(path)
  payload = cma_es.load(file)
  config = ml_collections.ConfigDict(payload['config'])
  vector = payload.get(WHICH_KEYS[which])
  if vector is None:
    raise ValueError(f'{file} has no {which!r} agent yet (best: no generation completed; '
                     'best_eval: no evaluation completed).')
  agent = policy.FlatAgent(policy.agent_config(config.agent,
                                               vision_tasks.OUTPUT_SIZES[config.task.name]))
  generation = int(payload['counters']['generation'])
  if which == 'best_eval':
    generation = int(payload['best_eval_generation'])
  return EvolvedAgent(agent, np.asarray(vector, np.float32), config, generation,
                      f'{config.task.name} agent, generation {generation} ({which}), {file}')


def _tasks(evolved: EvolvedAgent, modification: str, count: int, max_steps: int) -> list:
  return [vision_tasks.make_task(evolved.config.task.name, modification, max_steps=max_steps)
          for _ in range(count)]


def play(evolved: EvolvedAgent, modification: str, seeds: Sequence[int], *, envs: int = 4,
         max_steps: int = 0, observer: Optional[rollouts.StepObserver] = None) -> rollouts.Results:
  """Episodes of the agent on `seeds` in `modification` (training-time early stops off)."""
  tasks = _tasks(evolved, modification, min(envs, len(seeds)), max_steps)
  try:
    return rollouts.play(tasks, evolved.agent, evolved.vector[None],
                         [rollouts.Job(0, int(s)) for s in seeds], observer)
  finally:
    for task in tasks:
      task.close()


def highlight_patches(frame: np.ndarray, top: np.ndarray, importance: np.ndarray,
                      config) -> np.ndarray:
  """`frame` with its top-K patches whitened, more opaque for more important ones (004 Fig. 1)."""
  image = frame.astype(np.float32)
  side = config.patches_per_side
  weights = importance[top] / max(float(importance[top].max()), 1e-12)
  for index, weight in zip(top, weights):
    row, col = (int(index) // side) * config.stride, (int(index) % side) * config.stride
    window = image[row:row + config.patch_size, col:col + config.patch_size]
    alpha = 0.35 + 0.5 * float(weight)
    window[:] = (1 - alpha) * window + alpha * 255.0
  return image.astype(np.uint8)


def patch_video(evolved: EvolvedAgent, modification: str, seed: int, out: str, *,
                max_steps: int = 0, every: int = 1, scale: int = 3, fps: float = 20.0) -> tuple:
  """A GIF of one episode, the observation beside it with the top-K patches; (path, return)."""
  frames = []

  def observe(index, image, step):
    del index
    if len(frames_seen) % every == 0:
      panel = render.hstack([render.scale(image, scale), render.scale(highlight_patches(
          image, np.asarray(step.top_patches), np.asarray(step.importance),
          evolved.agent.config), scale)])
      frames.append(panel)
    frames_seen.append(1)

  frames_seen: list = []
  result = play(evolved, modification, [seed], envs=1, max_steps=max_steps, observer=observe)
  title = [f'{evolved.config.task.name} ({modification}), seed {seed}: return '
           f'{result.returns[0]:.1f} in {result.steps[0]} steps; right: the {evolved.agent.config.top_k} '
           'patches the agent sees (whiter = more important)', evolved.description]
  banner = render.banner(frames[0].shape[1], title, size=10)
  path = render.save_gif([render.vstack([banner, f], gap=0) for f in frames],
                         os.path.join(out, f'patches_{modification}_seed{seed}.gif'), fps=fps)
  return path, float(result.returns[0])


def importance_in_top_quantile(importance: np.ndarray, quantile: float = TOP_QUANTILE) -> np.ndarray:
  """Per step, the importances at or above that step's `quantile` (004 Fig. 6's selection)."""
  importance = np.asarray(importance, np.float64)
  cut = np.quantile(importance, quantile, axis=-1, keepdims=True)
  return importance[importance >= cut]


def patch_importance(evolved: EvolvedAgent, seeds: Sequence[int], out: str, *,
                     max_steps: int = 0, bins: int = 40) -> list:
  """Histogram per episode of the top-5 % patch importances (004 Fig. 6); PNG and CSV paths."""
  per_episode: dict = {}

  def observe(index, image, step):
    del image
    per_episode.setdefault(index, []).append(np.asarray(step.importance))

  result = play(evolved, 'none', seeds, max_steps=max_steps, observer=observe)
  selected = {i: importance_in_top_quantile(np.stack(v)) for i, v in per_episode.items()}
  edges = np.linspace(0.0, max(float(s.max()) for s in selected.values()), bins + 1)
  plt = render.pyplot()
  fig, ax = plt.subplots(figsize=(7, 4))
  for i in sorted(selected):
    counts, _ = np.histogram(selected[i], edges)
    ax.plot(0.5 * (edges[1:] + edges[:-1]), counts / max(counts.sum(), 1), alpha=0.6, lw=1)
  ax.set_xlabel('patch importance (column sum of the attention matrix)')
  ax.set_ylabel('fraction of top-5 % patches')
  ax.set_title(f'{len(selected)} test episodes (mean return {result.returns.mean():.1f}); '
               f'{evolved.config.task.name}, generation {evolved.generation}', fontsize=9)
  fig.tight_layout()
  png = os.path.join(out, 'patch_importance.png')
  fig.savefig(png, dpi=100)
  plt.close(fig)
  path = os.path.join(out, 'patch_importance.csv')
  with open(path, 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['episode', 'seed', 'return', 'steps', 'bin_low', 'bin_high', 'count'])
    for i in sorted(selected):
      counts, _ = np.histogram(selected[i], edges)
      for low, high, count in zip(edges[:-1], edges[1:], counts):
        writer.writerow([i, seeds[i], f'{result.returns[i]:.1f}', result.steps[i], f'{low:.4f}',
                         f'{high:.4f}', count])
  return [png, path]


@dataclasses.dataclass
class Score:
  modification: str
  mean: float
  std: float
  episodes: int
  paper: Optional[tuple]  # (mean, std) of 004 Table 4, where it reports one


def generalisation(evolved: EvolvedAgent, modifications: Sequence[str], episodes: int,
                   out: str, *, envs: int = 4, first_seed: int = 0, max_steps: int = 0,
                   log=print) -> tuple:
  """Mean and std over `episodes` test episodes per modification (004 Tables 3-4); CSV and Markdown."""
  task = evolved.config.task.name
  scores = []
  for modification in modifications:
    vision_tasks.validate(task, modification)
    result = play(evolved, modification, range(first_seed, first_seed + episodes), envs=envs,
                  max_steps=max_steps)
    scores.append(Score(modification, float(result.returns.mean()), float(result.returns.std()),
                        episodes, vision_tasks.PAPER_SCORES.get((task, modification))))
    log(f'[generalisation] {modification}: {scores[-1].mean:.1f} +- {scores[-1].std:.1f} '
        f'over {episodes} episodes')
  csv_path = os.path.join(out, 'generalisation.csv')
  with open(csv_path, 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['task', 'modification', 'episodes', 'mean', 'std', 'paper_mean', 'paper_std'])
    for s in scores:
      writer.writerow([task, s.modification, s.episodes, f'{s.mean:.1f}', f'{s.std:.1f}',
                       *(s.paper if s.paper else ('', ''))])
  md_path = os.path.join(out, 'generalisation.md')
  with open(md_path, 'w') as f:
    f.write(f'{evolved.description}; {episodes} episodes per column (seeds {first_seed}..'
            f'{first_seed + episodes - 1})\n\n')
    f.write('| | ' + ' | '.join(s.modification for s in scores) + ' |\n')
    f.write('|---' * (len(scores) + 1) + '|\n')
    f.write('| this agent | ' + ' | '.join(f'{s.mean:.0f} ± {s.std:.0f}' for s in scores) + ' |\n')
    f.write('| 004 (Table 4) | ' + ' | '.join(
        f'{s.paper[0]} ± {s.paper[1]}' if s.paper else '—' for s in scores) + ' |\n')
  return scores, [csv_path, md_path]
