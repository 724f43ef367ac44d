"""Follows a running program through `<workdir>/metrics.jsonl`: progress lines and the summary.

Every node appends labelled records there (`s3ta.utils.metrics.MetricsWriter`):
`learner` (steps, consumed frames, queue size, policy lag, final stop reason),
`actor_<i>` (generated frames, episodes, returns, stage timers), `inference_<k>`
(central inference: requests per call, busy fraction) and `evaluator` (returns,
human-normalised score). The launcher reads them; nothing else does.
"""

import collections
import json
import os
from typing import Optional


from launch.supervision import SUPERVISOR_PREFIX
from s3ta.learning.progress import STOP_REASONS
from s3ta.utils import metrics

_CARRIED_KEYS = ('frames', 'episodes')


class RunMonitor:
  """Incrementally reads metrics.jsonl (from its size at construction, unless `from_start`)."""

  def __init__(self, workdir: str, queue_size: int, from_start: bool = False,
               return_window: int = 100, inference_mode: Optional[str] = None):
    self.inference_mode = inference_mode  # 'actor' | 'central' | None (not stated)
    self.path = os.path.join(workdir, metrics.JSONL_FILE)
    self._offset = 0
    if not from_start and os.path.exists(self.path):
      self._offset = os.path.getsize(self.path)
    self._queue_size = queue_size
    self.latest: dict[str, dict] = {}
    self.first: dict[str, dict] = {}
    self._final_learner: Optional[dict] = None  # bounded state only: first/latest per label
    self.return_window = return_window  # episodes behind the reported mean return
    self._returns = collections.deque(maxlen=1000)  # (count, mean) windows, newest last
    # Frames and episodes of a label's earlier worker processes (a restarted actor counts from 0).
    self._carried: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)

  def poll(self) -> int:
    """Reads complete new lines; returns how many records arrived."""
    if not os.path.exists(self.path):
      return 0
    with open(self.path, 'rb') as f:
      f.seek(self._offset)
      data = f.read()
    end = data.rfind(b'\n')
    if end < 0:
      return 0
    self._offset += end + 1
    count = 0
    for line in data[:end].decode('utf-8', 'replace').splitlines():
      try:
        record = json.loads(line)
      except json.JSONDecodeError:
        continue
      label = record.get('label', '?')
      previous = self.latest.get(label)
      if previous is not None and previous.get('pid') != record.get('pid'):
        for key in _CARRIED_KEYS:  # a restarted worker: keep what the dead one produced
          self._carried[label][key] += previous.get(key, 0)
      self.first.setdefault(label, record)
      self.latest[label] = record
      if label == 'learner' and record.get('final'):
        self._final_learner = record
      if label.startswith('actor_') and record.get('window_episodes'):
        self._returns.append((record['window_episodes'], record.get('window_return_mean')))
      count += 1
    return count

  def actors(self) -> list[dict]:
    """The latest record of each actor, with frames and episodes of its restarted workers added."""
    return [dict(r, **{k: r.get(k, 0) + self._carried[label][k] for k in _CARRIED_KEYS})
            for label, r in sorted(self.latest.items()) if label.startswith('actor_')]

  def supervision(self) -> Optional[dict]:
    """{'alive', 'nodes', 'restarts', 'degraded'} of the supervised nodes (alive/nodes count
    actors only), None before any supervisor record."""
    nodes = {label[len(SUPERVISOR_PREFIX):]: r for label, r in self.latest.items()
             if label.startswith(SUPERVISOR_PREFIX)}
    actors = [r for name, r in nodes.items() if name.startswith('actor_')]
    if not actors:
      return None
    return dict(alive=sum(int(r.get('alive', 0)) for r in actors), nodes=len(actors),
                restarts=sum(int(r.get('restarts', 0)) for r in nodes.values()),
                degraded=sorted(name for name, r in nodes.items() if r.get('degraded')))

  def inference(self) -> Optional[dict]:
    """{'mode', 'nodes', 'requests_per_call', 'busy_frac', 'retries'}: where policy steps run
    and, for central inference, how full its calls are (latest record of each node) and
    how often actors had to retry a call; None when the mode was not stated."""
    if self.inference_mode is None:
      return None
    nodes = [r for label, r in self.latest.items() if label.startswith('inference_')]
    mean = lambda key: (sum(float(r.get(key) or 0) for r in nodes) / len(nodes)) if nodes else None
    return dict(mode=self.inference_mode, nodes=len(nodes),
                requests_per_call=mean('requests_per_call'), busy_frac=mean('busy_frac'),
                retries=sum(int(a.get('inference_retries', 0)) for a in self.actors()))

  def snapshot(self) -> dict:
    """Totals right now: frames, learner steps, episodes, mean return, queue fill, lag."""
    actors = self.actors()
    learner = self.latest.get('learner', {})
    count, total = 0, 0.0  # over the newest windows that hold the last `return_window` episodes
    for n, m in reversed(self._returns):
      if m is not None and n:
        count, total = count + n, total + n * m
        if count >= self.return_window:
          break
    mean_return = total / count if count else None
    queue = learner.get('queue_size')
    return dict(
        frames=int(sum(a.get('frames', 0) for a in actors)),
        learner_steps=int(learner.get('learner_steps', 0)),
        learner_frames=int(learner.get('learner_frames', 0)),
        param_version=None if learner.get('param_version') is None else int(
            learner['param_version']),
        episodes=int(sum(a.get('episodes', 0) for a in actors)),
        mean_return=mean_return,
        queue_fill=(queue / self._queue_size) if queue is not None and queue >= 0 else None,
        policy_lag=learner.get('policy_lag'),
        num_actors_reporting=len(actors),
        actor_param_versions=[int(a.get('param_version', -1)) for a in actors],
        evaluation=self.latest.get('evaluator'))

  def final_learner_record(self) -> Optional[dict]:
    return self._final_learner

  def end_to_end_frames_per_s(self) -> Optional[float]:
    """Generated frames/s over the window in which every actor reported (steady state)."""
    actors = [label for label in self.latest if label.startswith('actor_')]
    if not actors:
      return None
    spans = []
    for label in actors:
      first, last = self.first[label], self.latest[label]
      if 'frames' in first and 'frames' in last and last['time'] > first['time']:
        spans.append((first['time'], first['frames'], last['time'],
                      last['frames'] + self._carried[label]['frames']))
    if not spans:
      return None
    return float(sum((f1 - f0) / max(t1 - t0, 1e-9) for t0, f0, t1, f1 in spans))

  def stop_reason(self) -> Optional[str]:
    """The learner's STOP_REASONS entry from its final record, or None."""
    code = int((self.final_learner_record() or {}).get('stop_reason_code') or 0)
    return STOP_REASONS[code - 1] if 0 < code <= len(STOP_REASONS) else None

  def progress_kwargs(self) -> dict:
    s = self.snapshot()
    return dict(frames=s['frames'], learner_steps=s['learner_steps'], episodes=s['episodes'],
                mean_return=s['mean_return'], queue_fill=s['queue_fill'],
                policy_lag=s['policy_lag'], actors=self.supervision(),
                inference=self.inference())


def format_summary(monitor: RunMonitor, wall_s: float, checkpoint: Optional[str]) -> str:
  s = monitor.snapshot()
  reason = monitor.stop_reason()
  lines = ['=' * 72, 'Run summary',
           f'  wall time          {wall_s:.1f} s',
           f'  stop reason        {reason or "unknown (no final learner record)"}',
           f'  actor frames       {s["frames"]:,} ({s["num_actors_reporting"]} actors reported)',
           f'  learner steps      {s["learner_steps"]:,} (consumed {s["learner_frames"]:,} frames)',
           f'  param version      {s["param_version"]} (actors last used {s["actor_param_versions"]})',
           f'  episodes           {s["episodes"]:,}'
           + (f', mean return {s["mean_return"]:.2f} (last ~{monitor.return_window})'
              if s['mean_return'] is not None else '')]
  e2e = monitor.end_to_end_frames_per_s()
  if e2e is not None:
    lines.append(f'  actor frames/s     {e2e:,.0f} (all actors, steady state)')
  if s['policy_lag'] is not None:
    lines.append(f'  policy lag         {s["policy_lag"]:.1f} learner steps (last window)')
  ev = s['evaluation']
  if ev:
    hns = ev.get('human_normalized_score')
    lines.append(f'  last evaluation    mean return {ev.get("mean_return")} over '
                 f'{int(ev.get("episodes", 0))} episodes ({int(ev.get("truncated", 0))} cut), '
                 f'params v{int(ev.get("param_version", -1))}'
                 + (f', human-normalised {100 * hns:.1f}%' if hns is not None else ''))
  inference = monitor.inference()
  if inference and inference['mode'] == 'central' and inference['requests_per_call'] is not None:
    lines.append(f'  inference          central, {inference["nodes"]} node(s), '
                 f'{inference["requests_per_call"]:.1f} actor requests per call, '
                 f'busy {100 * inference["busy_frac"]:.0f}%, {inference["retries"]} retried calls')
  elif inference:
    lines.append(f'  inference          {inference["mode"]}')
  supervision = monitor.supervision()
  if supervision:
    lines.append(f'  worker restarts    {supervision["restarts"]}'
                 + (f' (restart budget spent, left down: {", ".join(supervision["degraded"])})'
                    if supervision['degraded'] else ''))
  lines.append(f'  checkpoint         {checkpoint or "none"}')
  lines.append('=' * 72)
  return '\n'.join(lines)
