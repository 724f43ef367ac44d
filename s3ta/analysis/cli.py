"""Command line for the interpretability tools: `python -m s3ta.analysis <subcommand> ...`.

Subcommands (paper 000 section in brackets):
  attention-video   GIF of the frame and each head's attention map over it (§4, Fig. 2)
  what-where        content-vs-location maps per head, eq. 8-11 (§4.6, A.5, Fig. 6)
  saliency          Greydanus et al. perturbation saliency next to attention (§4.7, Fig. 7)
  hard-attention    scores with attention thresholded at t, eq. 12-13 (A.6, Table 5)
  inject            paste a sprite into the observation and watch the reaction (§4.2, Fig. 3)
  attention-stats   per-head x/y marginals and entropy over an episode (A.7, Fig. 10)
  attention-objects each head's attention mass on the game's objects (ball, paddles), found by colour
  feature-attention labelled maps of the feature agents (papers 002/003; needs --checkpoint)
  tmaze-events      per-episode mistakes, blocked moves and detours of a T-maze agent (002)
  patch-video       GIF of an evolved AttentionAgent's top-K patches (paper 004, Fig. 1)
  patch-importance  histogram of its top-5 % patch importances over test episodes (004 Fig. 6)
  generalisation    its mean and std on the original and modified environments (004 Tables 3-4)
  parameter-counts  a config's networks by sub-network, beside 002's Tables 3-4 (no checkpoint)

Without --checkpoint the agent is randomly initialised (every output says so).
Bad inputs print one `error: ...` line and exit with status 2.
"""

import argparse
import csv
import os
import sys
import time
from typing import Optional, Sequence

import numpy as np
from PIL import Image

from s3ta.analysis import feature_attention as feature_attention_lib
from s3ta.analysis import numerics, objects, render, rollout
from s3ta.analysis import parameter_counts as parameter_counts_lib
from s3ta.analysis import patches as patches_lib
from s3ta.analysis import tmaze_events as tmaze_events_lib
from s3ta.analysis.rollout import log
from s3ta.envs import vision_tasks


def _ints(text: str, count: int, name: str) -> tuple[int, ...]:
  try:
    values = tuple(int(v) for v in text.split(','))
  except ValueError:
    values = ()
  if len(values) != count:
    raise ValueError(f'{name} must be {count} comma-separated integers, got {text!r}.')
  return values


def _thresholds(text: str) -> list[float]:
  try:
    values = [float(v) for v in text.split(',') if v.strip()]
  except ValueError as e:
    raise ValueError(f'--thresholds must be comma-separated numbers, got {text!r}.') from e
  if not values:
    raise ValueError('--thresholds is empty.')
  for t in values:
    if not 0.0 <= t <= 1.0:
      raise ValueError(f'attention threshold {t} is outside [0, 1].')
  return values


def _positive(args, *names):
  for name in names:
    if getattr(args, name) < 1:
      raise ValueError(f'--{name.replace("_", "-")} must be >= 1, got {getattr(args, name)}.')


def _setup(args, num_envs: int = 1, attention_threshold: float = 0.0, need_attention: bool = True,
           settings: Optional[rollout.EnvSettings] = None):
  """Environment settings, agent and runner shared by all subcommands."""
  if settings is None:
    settings = rollout.env_settings(args.checkpoint, args.game)
  if settings.trained_game and settings.trained_game != settings.game:
    log(f'[{args.command}] WARNING: the checkpoint was trained on {settings.trained_game}, '
        f'playing {settings.game}.')
  env = rollout.make_env(settings, num_envs=num_envs, seed=args.seed)
  try:
    agent = rollout.load_agent(args.checkpoint, env.num_actions, args.network, args.seed,
                               env.observation_shape)
    if need_attention:
      rollout.require_attention(agent, args.command)
  except Exception:
    env.close()
    raise
  frames = 'gray 84x84' if settings.light_observation else 'RGB 210x160'
  log(f'[{args.command}] {settings.game} ({frames} frames): agent = {agent.description}')
  os.makedirs(args.out, exist_ok=True)
  runner = rollout.AgentRunner(agent, env, seed=args.seed, greedy=args.greedy,
                               attention_threshold=attention_threshold)
  return agent, runner, settings


def _wrote(path: str) -> str:
  print(f'wrote {os.path.abspath(path)}', flush=True)
  return path


def _header(settings, args, agent, t: int, record, extra: str = '') -> list[str]:
  name = rollout.action_name(settings.game, record.action)
  source = 'random init' if args.checkpoint is None else 'checkpoint'
  return [f'{settings.game} ({source})  step {t}' + (f'  {extra}' if extra else ''),
          f'action {record.action} {name}  value {record.value:+.3f}  reward {record.reward:+.0f}']


# ------------------------------------------------------------------------------------------------


def attention_video(args) -> None:
  _positive(args, 'steps', 'every')
  agent, runner, settings = _setup(args)
  records = rollout.play(runner, args.steps, args.command)
  runner.close()
  frames = []
  for t, record in enumerate(records):
    if t % args.every:
      continue
    row = render.hstack(render.head_panels(record.frame, record.attention, args.scale))
    frames.append(render.vstack([render.banner(row.shape[1], _header(settings, args, agent, t, record)), row], gap=0))
  _wrote(render.save_gif(frames, os.path.join(args.out, 'attention_video.gif'), args.fps))
  _wrote(render.save_png(frames[-1], os.path.join(args.out, 'attention_last_frame.png')))


def what_where(args) -> None:
  _positive(args, 'steps', 'every')
  agent, runner, settings = _setup(args)
  if agent.network.config.kind == 'l2_keys':
    raise ValueError('what-where needs queries; the l2_keys network has none.')
  basis = runner.basis
  records = rollout.play(runner, args.steps, args.command)
  runner.close()
  frames, arrays = [], {'what': [], 'where': [], 'contribution': [], 'attention': []}
  legend = None
  for t, record in enumerate(records):
    ww = numerics.what_where(record.queries, record.keys, basis, record.attention)
    for k in ('what', 'where', 'contribution'):
      arrays[k].append(getattr(ww, k).astype(np.float32))
    arrays['attention'].append(record.attention.astype(np.float32))
    if t % args.every:
      continue
    panels = [render.labelled(render.scale(record.frame, args.scale), ['frame', ''])]
    for n in range(record.attention.shape[0]):
      share = float(np.sum(ww.contribution[n]) / numerics.LOG10)  # in [-1, 1]: what (+) vs where (-)
      panel = render.scale(render.what_where_overlay(record.frame, ww.difference[n], record.attention[n]),
                           args.scale)
      balance = f'{share:+.2f}'.replace('-0.00', '+0.00')
      panels.append(render.labelled(panel, [f'head {n}', f'ΣC/log10 = {balance}']))
    row = render.hstack(panels)
    legend = render.what_where_legend(row.shape[1]) if legend is None else legend
    frames.append(render.vstack([render.banner(row.shape[1], _header(settings, args, agent, t, record)), row, legend],
                                gap=0))
  _wrote(render.save_gif(frames, os.path.join(args.out, 'what_where.gif'), args.fps))
  _wrote(render.save_png(frames[-1], os.path.join(args.out, 'what_where_last.png')))
  path = os.path.join(args.out, 'what_where.npz')
  np.savez_compressed(path, **{k: np.stack(v) for k, v in arrays.items()})
  _wrote(path)


def saliency(args) -> None:
  _positive(args, 'warmup', 'stride', 'batch')
  if args.mask_sigma <= 0 or args.blur_sigma <= 0:
    raise ValueError('--mask-sigma and --blur-sigma must be > 0.')
  agent, runner, settings = _setup(args, need_attention=False)
  rollout.play(runner, args.warmup, f'{args.command} warm-up')
  # The final frame: saliency is computed from the recurrent state it is processed with.
  frame = np.asarray(runner.env_step.observation[0])
  log(f'[{args.command}] perturbing the final frame from the same recurrent state')
  every = [0]

  def progress(done, total):
    if done * 10 // total > every[0] or done == total:
      every[0] = done * 10 // total
      log(f'[{args.command}] perturbed frames {done}/{total}')

  s_pi, s_v, ys, xs = numerics.saliency_maps(
      lambda frames: runner.evaluate_frames(frames, args.batch), frame, stride=args.stride,
      mask_sigma=args.mask_sigma, blur_sigma=args.blur_sigma, batch_size=args.batch, progress=progress)
  record, _ = runner.step()  # attention of the unperturbed final frame
  runner.close()
  height, width = frame.shape[:2]
  pi_map = numerics.grid_to_frame(s_pi, ys, xs, height, width)
  v_map = numerics.grid_to_frame(s_v, ys, xs, height, width)
  panels = [render.labelled(render.scale(frame, args.scale), ['final frame', '']),
            render.labelled(render.scale(render.saliency_overlay(frame, pi_map), args.scale),
                            ['policy saliency S_pi', f'max {s_pi.max():.2e}']),
            render.labelled(render.scale(render.saliency_overlay(frame, v_map), args.scale),
                            ['value saliency S_V', f'max {s_v.max():.2e}'])]
  if record.attention is not None:
    panels += render.head_panels(frame, record.attention, args.scale)[1:]
  row = render.hstack(panels)
  lines = [f'{settings.game}: perturbation saliency after {args.warmup} steps ({agent.description})',
           f'green = 0.5||pi(X\')-pi(X)||^2 and 0.5(V(X\')-V(X))^2, each scaled by its max; '
           f'blur sigma {args.blur_sigma}, region sigma {args.mask_sigma}, every {args.stride} px']
  image = render.vstack([render.banner(row.shape[1], lines, size=11), row], gap=0)
  _wrote(render.save_png(image, os.path.join(args.out, 'saliency.png')))
  path = os.path.join(args.out, 'saliency.npz')
  np.savez_compressed(path, policy=s_pi, value=s_v, ys=ys, xs=xs, frame=frame,
                      attention=record.attention if record.attention is not None else np.zeros(0))
  _wrote(path)


def hard_attention(args) -> None:
  thresholds = _thresholds(args.thresholds)
  _positive(args, 'episodes')
  if args.max_steps_per_episode < 0:
    raise ValueError(f'--max-steps-per-episode must be >= 0, got {args.max_steps_per_episode}.')
  results = []
  agent, runner, settings = _setup(args, num_envs=args.episodes, need_attention=True)
  for i, t in enumerate(thresholds):
    # Same env seed at every threshold: the same starting states, so differences come from t.
    runner.env.close()
    runner.restart(rollout.make_env(settings, num_envs=args.episodes, seed=args.seed), t, seed=args.seed)
    tracker_returns = np.zeros(args.episodes)
    finished = np.zeros(args.episodes, bool)
    steps = 0
    cap = args.max_steps_per_episode or 10**9
    start = time.time()
    while not finished.all() and steps < cap:
      _, env_step = runner.step_batch()
      steps += 1
      tracker_returns += np.where(finished, 0.0, env_step.reward)
      finished |= np.asarray(env_step.last, bool)
      if steps % 200 == 0:
        log(f'[{args.command}] t={t}: step {steps}, {int(finished.sum())}/{args.episodes} episodes done')
    runner.close()
    mean, stderr = numerics.mean_and_stderr(tracker_returns)
    results.append(dict(threshold=t, episodes=args.episodes, truncated=int((~finished).sum()),
                        mean=mean, stderr=stderr, steps=steps))
    log(f'[{args.command}] t={t}: mean {mean:.2f} +- {stderr:.2f} '
        f'({int((~finished).sum())} episodes cut at {steps} steps; {time.time() - start:.1f}s)')
  base = next((r for r in results if r['threshold'] == 0.0), results[0])
  for r in results:
    r['ratio'], r['ratio_stderr'] = numerics.ratio_with_error(r['mean'], r['stderr'], base['mean'],
                                                              base['stderr'])
  print(f'Hard attention (eq. 12-13) on {settings.game}: {args.episodes} episodes per threshold; '
        f'agent = {agent.description}')
  if any(r['truncated'] for r in results):
    print(f'NOTE: episodes still running after {args.max_steps_per_episode} steps were cut; '
          'their partial returns are counted.')
  if base['mean'] < 0:
    print('NOTE: the t=0 mean score is negative, so a ratio above 100% means a LOWER score.')
  print(f'{"threshold t":>11} | {"score (mean +- s.e.)":>22} | {"relative to t=" + str(base["threshold"]):>22}')
  print('-' * 62)
  for r in results:
    rel = ('n/a (t=0 mean is 0)' if np.isnan(r['ratio'])
           else f'{100 * r["ratio"]:.0f}% +- {100 * r["ratio_stderr"]:.0f}%')
    print(f'{r["threshold"]:>11.3g} | {r["mean"]:>11.2f} +- {r["stderr"]:<8.2f} | {rel:>22}')
  path = os.path.join(args.out, 'hard_attention.csv')
  with open(path, 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=['threshold', 'episodes', 'truncated', 'steps', 'mean', 'stderr',
                                           'ratio', 'ratio_stderr'])
    writer.writeheader()
    writer.writerows(results)
  _wrote(path)


def _prepare_sprite(args, frame_shape):
  """Validates the sprite options before anything runs.

  Returns (sprite or None, box): the PNG sprite (None for a patch that is cut from
  the frame at --sprite-step during the run) and its box (y, x, h, w) in the frame.
  """
  if not args.sprite_png and not args.sprite_box:
    raise ValueError('give the sprite: --sprite-png=FILE or --sprite-box=y,x,h,w (cut from step --sprite-step).')
  if args.sprite_png and args.sprite_box:
    raise ValueError('give either --sprite-png or --sprite-box, not both.')
  height, width = frame_shape[:2]
  sprite = None
  if args.sprite_png:
    if not os.path.isfile(args.sprite_png):
      raise FileNotFoundError(f'sprite PNG {args.sprite_png!r} does not exist.')
    image = Image.open(args.sprite_png)
    sprite = (np.asarray(image.convert('L'))[..., None] if frame_shape[-1] == 1
              else np.asarray(image.convert('RGB')))
    h, w = sprite.shape[:2]
  else:
    sy, sx, h, w = _ints(args.sprite_box, 4, '--sprite-box')
    if h < 1 or w < 1 or sy < 0 or sx < 0 or sy + h > height or sx + w > width:
      raise ValueError(f'--sprite-box {args.sprite_box} is not inside the {height}x{width} frame.')
    if not 0 <= args.sprite_step < args.before:
      raise ValueError(f'--sprite-step must be in [0, --before={args.before}) so the frame exists before '
                       f'the injection, got {args.sprite_step}.')
  y, x = _ints(args.inject_at, 2, '--inject-at')
  if y < 0 or x < 0 or y + h > height or x + w > width:
    raise ValueError(f'a {h}x{w} sprite at --inject-at {args.inject_at} does not fit the {height}x{width} frame.')
  return sprite, (y, x, h, w)


def inject(args) -> None:
  _positive(args, 'inject_steps')
  if args.before < 1 or args.after < 0:
    raise ValueError('--before must be >= 1 and --after >= 0.')
  settings = rollout.env_settings(args.checkpoint, args.game)
  sprite, box = _prepare_sprite(args, rollout.observation_shape(settings))
  agent, runner, settings = _setup(args, settings=settings)
  start, stop = args.before, args.before + args.inject_steps
  total = stop + args.after
  records, injected = [], {}
  every = max(1, total // 10)
  y, x, h, w = box
  for t in range(total):
    observation = runner.env_step.observation
    if t == start and sprite is None:
      sy, sx = _ints(args.sprite_box, 4, '--sprite-box')[:2]
      sprite = records[args.sprite_step].frame[sy:sy + h, sx:sx + w].copy()
    if start <= t < stop:
      observation = observation.copy()
      observation[0, y:y + h, x:x + w] = sprite
      injected[t] = True
    record, _ = runner.step(observation)
    records.append(record)
    if (t + 1) % every == 0 or t + 1 == total:
      log(f'[{args.command}] step {t + 1}/{total}' + ('  (sprite injected)' if t in injected else ''))
  runner.close()

  steps = np.arange(total)
  mass = np.stack([numerics.mass_in_box(r.attention, box, r.frame.shape) for r in records])
  values = np.array([r.value for r in records])
  actions = np.array([r.action for r in records])
  frames = []
  for t, record in enumerate(records):
    extra = 'SPRITE INJECTED' if t in injected else ''
    row = render.hstack(render.head_panels(record.frame, record.attention, args.scale, box=box))
    colour = render.HIGHLIGHT if extra else render.TEXT
    frames.append(render.vstack([render.banner(row.shape[1], _header(settings, args, agent, t, record, extra),
                                               colour=colour), row], gap=0))
  _wrote(render.save_gif(frames, os.path.join(args.out, 'inject.gif'), args.fps))

  # Strip: evenly spaced steps from just before to after the window, summed heads over the frame.
  picks = np.unique(np.linspace(max(0, start - 2), total - 1, num=min(args.strip, total)).round().astype(int))
  columns = []
  for t in picks:
    r = records[t]
    overlay = numerics.attention_overlay(render.as_rgb(r.frame), r.attention.sum(axis=0))
    overlay = render.scale(render.draw_box(overlay, box), args.scale)
    caption = [f't={t}{" *" if t in injected else ""}', f'{rollout.action_name(settings.game, r.action)}',
               f'V {r.value:+.2f}']
    columns.append(render.vstack([render.banner(overlay.shape[1], caption, size=11,
                                                colour=render.HIGHLIGHT if t in injected else render.TEXT),
                                  overlay], gap=0))
  strip = render.hstack(columns, gap=2)
  title = [f'{settings.game}: sprite {box[2]}x{box[3]} pasted at (y={box[0]}, x={box[1]}) for steps '
           f'{start}-{stop - 1} (* = injected; yellow box); all heads\' attention summed; '
           f'{agent.description}']
  strip = render.vstack([render.banner(strip.shape[1], title, size=11), strip], gap=0)
  _wrote(render.save_png(strip, os.path.join(args.out, 'inject_strip.png')))
  labels = [rollout.action_name(settings.game, a) for a in range(agent.network.num_actions)]
  uniform = float(numerics.mass_in_box(np.full((1,) + records[0].attention.shape[-2:], 1.0 /
                                               records[0].attention[0].size), box, records[0].frame.shape)[0])
  _wrote(render.plot_injection(steps, values, actions, mass, (start, stop),
                               os.path.join(args.out, 'inject_trace.png'),
                               f'{settings.game}: reaction to a sprite injected at steps {start}-{stop - 1}\n'
                               f'{agent.description}', labels, uniform_mass=uniform))
  path = os.path.join(args.out, 'inject.csv')
  with open(path, 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['step', 'injected', 'action', 'value'] + [f'mass_head_{n}' for n in range(mass.shape[1])])
    for t in steps:
      writer.writerow([t, int(t in injected), actions[t], f'{values[t]:.5f}'] + [f'{m:.5f}' for m in mass[t]])
  _wrote(path)


def attention_stats(args) -> None:
  _positive(args, 'max_steps')
  agent, runner, settings = _setup(args)
  attention = []
  every = max(1, args.max_steps // 10)
  for t in range(args.max_steps):
    record, env_step = runner.step()
    attention.append(record.attention)
    if (t + 1) % every == 0:
      log(f'[{args.command}] step {t + 1}/{args.max_steps} (stops at the end of the episode)')
    if env_step.last[0]:
      log(f'[{args.command}] episode ended after {t + 1} steps')
      break
  runner.close()
  attention = np.stack(attention)  # [T, N, h, w]
  frame_index = args.frame if args.frame >= 0 else len(attention) + args.frame
  if not 0 <= frame_index < len(attention):
    raise ValueError(f'--frame {args.frame} is outside the {len(attention)} recorded steps.')
  entropy = numerics.entropy(attention)  # [T, N]
  h, w = attention.shape[-2:]
  _wrote(render.plot_marginals(
      attention[frame_index], attention.mean(axis=0), os.path.join(args.out, 'attention_marginals.png'),
      f'{settings.game}: attention weight per column / row; bars: step {frame_index}, '
      f'line: mean over {len(attention)} steps\n{agent.description}'))
  _wrote(render.plot_entropy(
      entropy, os.path.join(args.out, 'attention_entropy.png'),
      f'{settings.game}: attention entropy per head over {len(attention)} steps (low = peaked)\n'
      f'{agent.description}', float(np.log(h * w))))
  over_x, over_y = numerics.marginals(attention)
  path = os.path.join(args.out, 'attention_stats.npz')
  np.savez_compressed(path, entropy=entropy, marginal_x=over_x, marginal_y=over_y)
  _wrote(path)
  path = os.path.join(args.out, 'attention_entropy.csv')
  with open(path, 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['step'] + [f'entropy_head_{n}' for n in range(entropy.shape[1])])
    for t, row in enumerate(entropy):
      writer.writerow([t] + [f'{v:.5f}' for v in row])
  _wrote(path)


def attention_objects(args) -> None:
  _positive(args, 'steps')
  if args.margin < 0:
    raise ValueError(f'--margin must be >= 0 pixels, got {args.margin}.')
  settings = rollout.env_settings(args.checkpoint, args.game)
  objects.game_objects(settings.game)  # fails before the agent loads for a game without colours
  agent, runner, settings = _setup(args, settings=settings)
  # Objects are found by their RGB colours: a gray agent's game is followed by an RGB twin.
  twin = rollout.RGBTwin(settings, args.seed) if settings.light_observation else None
  try:
    records = rollout.play(runner, args.steps, args.command, twin=twin)
  finally:
    runner.close()
    if twin is not None:
      twin.close()
  frames = np.stack([r.frame for r in records])
  attention = np.stack([r.attention for r in records])  # [T, N, h, w]
  results = objects.object_attention(attention, frames, settings.game, args.margin)
  for line in objects.describe(results):
    print(line, flush=True)
  path = os.path.join(args.out, 'attention_objects.csv')
  with open(path, 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(objects.TABLE_HEADER)
    writer.writerows(objects.table_rows(results))
  _wrote(path)
  _wrote(render.plot_object_attention(
      results, os.path.join(args.out, 'attention_objects.png'),
      f'{settings.game}: attention mass within {args.margin} px of each object, mean over the '
      f'steps it is visible ({len(records)} steps)\n{agent.description}'))


def feature_attention(args) -> None:
  _positive(args, 'steps')
  if args.checkpoint is None:
    raise ValueError('feature-attention needs --checkpoint (the run knows its environment).')
  kind, labels, maps, returns, shown = feature_attention_lib.record(
      args.checkpoint, args.steps, args.seed, args.greedy)
  title = (f'{kind} attention, {args.steps} steps of {args.checkpoint}'
           + (f'; episode returns {returns}' if returns else ''))
  for path in feature_attention_lib.write(kind, labels, maps, args.out, title, shown):
    _wrote(path)


def tmaze_events(args) -> None:
  _positive(args, 'episodes')
  if args.checkpoint is None:
    raise ValueError('tmaze-events needs --checkpoint (a T-maze training run).')
  rows, places, description = tmaze_events_lib.play(args.checkpoint, args.episodes, args.seed,
                                                     args.greedy)
  policy = 'greedy' if args.greedy else 'sampled'
  log(f'[{args.command}] {description}')
  means = tmaze_events_lib.summary(rows)
  log(f'[{args.command}] {len(rows)} {policy} episodes, per episode: '
      + ', '.join(f'{key} {value:.2f}' for key, value in means.items()))
  title = f'{description}; {len(rows)} {policy} episodes, return {means["episode_return"]:.2f}'
  for path in tmaze_events_lib.write(rows, places, args.out, title):
    _wrote(path)


def _evolved(args):
  if getattr(args, 'episodes', 1) < 1:
    raise ValueError(f'--episodes must be >= 1, got {args.episodes}.')
  if args.checkpoint is None:
    raise ValueError(f'{args.command} needs --checkpoint (a launch.evolve workdir or es_*.pkl).')
  evolved = patches_lib.load(args.checkpoint, args.which)
  log(f'[{args.command}] {evolved.description}')
  os.makedirs(args.out, exist_ok=True)
  return evolved


def patch_video(args) -> None:
  evolved = _evolved(args)
  vision_tasks.validate(evolved.config.task.name, args.modification)
  path, episode_return = patches_lib.patch_video(
      evolved, args.modification, args.seed, args.out, max_steps=args.max_steps,
      every=max(1, args.every), scale=args.scale, fps=args.fps)
  log(f'[{args.command}] episode return {episode_return:.1f}')
  _wrote(path)


def patch_importance(args) -> None:
  evolved = _evolved(args)
  for path in patches_lib.patch_importance(evolved, range(args.seed, args.seed + args.episodes),
                                           args.out, max_steps=args.max_steps):
    _wrote(path)


def generalisation(args) -> None:
  evolved = _evolved(args)
  task = evolved.config.task.name
  modifications = (vision_tasks.MODIFICATIONS[task] if args.modifications == 'all'
                   else tuple(m.strip() for m in args.modifications.split(',') if m.strip()))
  for modification in modifications:
    vision_tasks.validate(task, modification)
  _, paths = patches_lib.generalisation(evolved, modifications, args.episodes, args.out,
                                        envs=args.envs, first_seed=args.seed,
                                        max_steps=args.max_steps, log=log)
  for path in paths:
    _wrote(path)


def parameter_counts(args) -> None:
  config = parameter_counts_lib.load_config(args.config)
  kinds = [k.strip() for k in (args.kinds or parameter_counts_lib.default_kinds(config)).split(',')
           if k.strip()]
  rows = parameter_counts_lib.table(config, kinds)
  env = config.env
  where = f"{env.name} {env.get('game', '')}".strip()
  text = parameter_counts_lib.markdown(rows, f'Learnable parameters on {where}, config {args.config}')
  print(text)
  if args.out:
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, 'parameter_counts.md'), 'w') as f:
      f.write(text + '\n')
    with open(os.path.join(args.out, 'parameter_counts.csv'), 'w', newline='') as f:
      writer = csv.DictWriter(f, fieldnames=list(rows[0]))
      writer.writeheader()
      writer.writerows(rows)
    _wrote(args.out)


COMMANDS = {
    'attention-video': attention_video,
    'what-where': what_where,
    'saliency': saliency,
    'hard-attention': hard_attention,
    'inject': inject,
    'attention-stats': attention_stats,
    'attention-objects': attention_objects,
    'feature-attention': feature_attention,
    'tmaze-events': tmaze_events,
    'patch-video': patch_video,
    'patch-importance': patch_importance,
    'generalisation': generalisation,
    'parameter-counts': parameter_counts,
}


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog='python -m s3ta.analysis', description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  common = argparse.ArgumentParser(add_help=False)
  common.add_argument('--checkpoint', default=None,
                      help='training workdir or its checkpoints/ dir; newest checkpoint is used. '
                      'Absent: a randomly initialised network.')
  common.add_argument('--game', default=None,
                      help='Atari game as EnvPool names it (Pong, MsPacman, ...); default: the game the '
                      'checkpoint was trained on, else Pong.')
  common.add_argument('--out', required=True, help='output directory (created).')
  common.add_argument('--seed', type=int, default=0, help='environment, sampling and init seed.')
  common.add_argument('--network', choices=('small', 'paper'), default='small',
                      help='network size when no --checkpoint is given.')
  common.add_argument('--greedy', action='store_true', help='arg-max actions instead of sampling.')
  common.add_argument('--scale', type=int, default=1, help='integer upscaling of frames in images.')
  common.add_argument('--fps', type=float, default=10.0, help='GIF frames per second.')
  sub = parser.add_subparsers(dest='command', required=True, metavar='subcommand')

  p = sub.add_parser('attention-video', parents=[common], help='GIF of attention maps over the frames.')
  p.add_argument('--steps', type=int, default=200, help='agent steps to play (4 frames each).')
  p.add_argument('--every', type=int, default=1, help='render every k-th step.')

  p = sub.add_parser('what-where', parents=[common], help='eq. 8-11 content/location maps per head.')
  p.add_argument('--steps', type=int, default=100)
  p.add_argument('--every', type=int, default=1, help='render every k-th step.')

  p = sub.add_parser('saliency', parents=[common], help='perturbation saliency vs attention.')
  p.add_argument('--warmup', type=int, default=250, help='unperturbed steps before the analysed frame.')
  p.add_argument('--stride', type=int, default=5, help='pixels between perturbation centres.')
  p.add_argument('--mask-sigma', type=float, default=5.0, help='Gaussian width of the blurred region.')
  p.add_argument('--blur-sigma', type=float, default=3.0, help='Gaussian blur applied in the region.')
  p.add_argument('--batch', type=int, default=64, help='perturbed frames per network call.')

  p = sub.add_parser('hard-attention', parents=[common], help='scores at attention thresholds (Table 5).')
  p.add_argument('--thresholds', default='0,0.05,0.1,0.2', help='comma-separated t in [0, 1].')
  p.add_argument('--episodes', type=int, default=15, help='episodes per threshold (played in parallel).')
  p.add_argument('--max-steps-per-episode', type=int, default=0,
                 help='cut episodes after this many agent steps (0: play to the end).')

  p = sub.add_parser('inject', parents=[common], help='paste a sprite into the observation (Fig. 3).')
  p.add_argument('--before', type=int, default=30, help='steps played before the injection starts.')
  p.add_argument('--inject-steps', type=int, default=10, help='steps the sprite stays in the observation.')
  p.add_argument('--after', type=int, default=20, help='steps recorded after the injection.')
  p.add_argument('--inject-at', default='100,80', help='y,x of the sprite\'s top-left corner in the frame.')
  p.add_argument('--sprite-png', default=None, help='sprite image file (RGB).')
  p.add_argument('--sprite-box', default=None, help='y,x,h,w of a patch cut from the frame at --sprite-step.')
  p.add_argument('--sprite-step', type=int, default=0, help='step whose frame the patch is cut from.')
  p.add_argument('--strip', type=int, default=10, help='frames in the PNG strip.')

  p = sub.add_parser('attention-stats', parents=[common], help='marginals and entropy per head (Fig. 10).')
  p.add_argument('--max-steps', type=int, default=2000, help='stop after this many steps if the episode '
                 'has not ended.')
  p.add_argument('--frame', type=int, default=-1, help='step shown as bars in the marginals plot.')

  p = sub.add_parser('attention-objects', parents=[common],
                     help="each head's attention mass on the game's objects, found by colour.")
  p.add_argument('--steps', type=int, default=1000, help='agent steps to play (across episodes).')
  p.add_argument('--margin', type=int, default=16,
                 help="pixels added around each object's box (16: two cells of the paper's map).")

  p = sub.add_parser('feature-attention', parents=[common],
                     help='labelled attention maps of the feature agents (002/003).')
  p.add_argument('--steps', type=int, default=200, help='agent steps to record.')

  p = sub.add_parser('tmaze-events', parents=[common],
                     help="a T-maze agent's mistakes, blocked moves and detours per episode (002).")
  p.add_argument('--episodes', type=int, default=20, help='episodes, played in parallel.')

  evolved = argparse.ArgumentParser(add_help=False)  # paper 004's evolved agents
  evolved.add_argument('--checkpoint', default=None, help='launch.evolve workdir or one es_*.pkl.')
  evolved.add_argument('--which', choices=patches_lib.WHICH, default='centre',
                       help="centre: the distribution's mean (004's agent); best: the best "
                       "candidate seen; best_eval: the mean that scored best on the evaluation "
                       "seeds.")
  evolved.add_argument('--out', required=True, help='output directory (created).')
  evolved.add_argument('--seed', type=int, default=0, help='(first) episode seed.')
  evolved.add_argument('--max-steps', type=int, default=0, help="episode limit (0: the task's own).")
  evolved.add_argument('--scale', type=int, default=3, help='integer upscaling of frames in images.')
  evolved.add_argument('--fps', type=float, default=20.0, help='GIF frames per second.')
  p = sub.add_parser('patch-video', parents=[evolved], help="GIF of an evolved agent's top-K patches.")
  p.add_argument('--modification', default='none', help='environment variant (004 section 5.5).')
  p.add_argument('--every', type=int, default=2, help='render every k-th step.')
  p = sub.add_parser('patch-importance', parents=[evolved], help='top-5 %% importance histogram.')
  p.add_argument('--episodes', type=int, default=20, help='test episodes (004 Fig. 6: 20).')
  p = sub.add_parser('generalisation', parents=[evolved], help='scores on the modified environments.')
  p.add_argument('--episodes', type=int, default=100, help='test episodes per environment (004: 100).')
  p.add_argument('--modifications', default='all', help="comma-separated variants, or 'all'.")
  p.add_argument('--envs', type=int, default=4, help='environments played in lockstep.')

  p = sub.add_parser('parameter-counts', help="a config's networks by sub-network (002 Tables 3-4).")
  p.add_argument('--config', required=True, help='experiment config file, path/to/config.py[:arg].')
  p.add_argument('--kinds', default=None,
                 help='comma-separated network kinds (config.network.kind values); default: '
                      "the paper's for the config's environment (T-maze: time_attention,"
                      'resnet_lstm; RAM features: gawrl,dawrl,mlp,cnn1d,acnn).')
  p.add_argument('--out', default=None, help='also write parameter_counts.md/.csv here.')
  return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
  args = build_parser().parse_args(argv)
  if getattr(args, 'scale', 1) < 1 or not getattr(args, 'fps', 1.0) > 0:
    print(f'error: --scale must be >= 1 and --fps > 0, got --scale={getattr(args, "scale", 1)} '
          f'--fps={getattr(args, "fps", 1.0)}.', file=sys.stderr)
    return 2
  out = getattr(args, 'out', None)
  if out and os.path.exists(out) and not os.path.isdir(out):
    print(f'error: --out={out!r} is a file; give a directory (created if missing).', file=sys.stderr)
    return 2
  start = time.time()
  try:
    COMMANDS[args.command](args)
  except (ValueError, FileNotFoundError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  except OSError as e:  # e.g. an --out that cannot be written
    print(f'error: {e.strerror or e}: {e.filename!r}.' if e.filename else f'error: {e}.',
          file=sys.stderr)
    return 2
  log(f'[{args.command}] done in {time.time() - start:.1f}s')
  return 0
