"""Single-machine IMPALA training: one process, environments on CPU threads, one device for the rest.

  python -m launch.train_single --config=experiments/atari_fast.py --workdir=DIR
  python -m launch.train_single --config=experiments/catch.py --workdir=DIR
  python -m launch.train_single --config=experiments/atari_expert.py --workdir=DIR \
      --config.single_machine.device=gpu

The Cleanba / SEED RL pattern (s3ta/acting/device_actor.py): G environment groups
stepped in turn on CPU threads, the policy of a whole group in one jitted call on
the learner's device, recurrent state and unrolls on that device, and the same
`sgd_step` as the distributed learner on it; parameters never leave the device.
Acting and learning overlap: the main thread collects unroll i + 1 while a learner
thread updates on unroll i. `config.single_machine.policy_lag` = L makes unroll i
act with the parameters after the update on unroll i - 1 - L (0: synchronous),
whatever the timing, so a seed gives the same run; the policy lag in learner steps
is logged. It reads the same configs and `--config.x=y` overrides as
`launch.train`, and writes the same workdir: `checkpoints/` (a rerun resumes),
`metrics.jsonl` (labels learner, actor_0, evaluator), `tensorboard/` (when
TensorFlow imports), a progress line every `single_machine.progress_period_s` and a
summary. Exit status: 0 done, 1 failure, 2 bad config or device, 130 Ctrl-C, 143
SIGTERM (both stop the loops at their next check and save a final checkpoint; a second
signal exits at once without one).
"""

if __name__ == '__main__':  # first: re-executing now costs only the interpreter's start
  from launch import host_tuning  # pylint: disable=g-import-not-at-top
  host_tuning.reexec_with_host_tuning()  # glibc huge pages for XLA:CPU's buffers (host_tuning.py)

import dataclasses
import logging
import os
import queue
import signal
import sys
import threading
import time
from typing import Callable, Optional

import s3ta  # noqa: F401  pylint: disable=unused-import  (rlax before TF)

import jax

from launch import cli
from launch import config_checks
from launch import monitor as monitor_lib
from launch.seeds import actor_env_seed
from s3ta.acting.actor import actor_record
from s3ta.acting.device_actor import DeviceActor, group_sizes, slice_batches
from s3ta.acting.evaluator import Evaluator
from s3ta.envs import factory
from s3ta.learning import (LearnerConfig, init_training_state, make_sgd_step, ppo,
                           resume_with_config)
from s3ta.learning.learner_core import describe_config_changes
from s3ta.learning.progress import (STOP_REASONS, Counters, StepStats, StopRule,
                                    nonfinite_halt_message)
from s3ta.networks import make_network, parameter_counts
from s3ta.utils import checkpoint as checkpoint_lib
from s3ta.utils import metrics as metrics_lib

DEVICES = ('auto', 'cpu', 'gpu', 'tpu')
ALGORITHMS = ('impala', 'ppo')  # V-trace actor-critic, or PPO (config.ppo; s3ta/learning/ppo.py)


@dataclasses.dataclass(frozen=True)
class Settings:
  """The single-machine fields of a config (`config.single_machine`), validated."""
  device: str = 'auto'
  algorithm: str = 'impala'  # one of ALGORITHMS
  num_envs: int = 0  # 0: config.num_actors * config.env.num_envs
  env_groups: int = 2
  policy_lag: int = 1
  progress_period_s: float = 10.0

  @classmethod
  def from_config(cls, config) -> 'Settings':
    section = dict(config.get('single_machine') or {})
    unknown = set(section) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
      raise ValueError(f'Unknown config.single_machine fields {sorted(unknown)}; valid: '
                       f'{[f.name for f in dataclasses.fields(cls)]}.')
    settings = cls(**section)
    if settings.algorithm not in ALGORITHMS:
      raise ValueError(f'config.single_machine.algorithm must be one of {ALGORITHMS}, got '
                       f'{settings.algorithm!r}.')
    if settings.device not in DEVICES:
      raise ValueError(f'config.single_machine.device must be one of {DEVICES}, got '
                       f'{settings.device!r}.')
    for name, low in (('num_envs', 0), ('env_groups', 1), ('policy_lag', 0)):
      value = getattr(settings, name)
      if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f'config.single_machine.{name} must be an integer >= {low}, got {value!r}.')
    if settings.progress_period_s <= 0:
      raise ValueError('config.single_machine.progress_period_s must be > 0, got '
                       f'{settings.progress_period_s!r}.')
    return settings

  def total_envs(self, config) -> int:
    return self.num_envs or int(config.get('num_actors', 1)) * int(config.env.num_envs)


def validate_config(config) -> Settings:
  """Raises ValueError naming the first bad value; returns the single-machine settings."""
  config_checks.validate_common(config)
  settings = Settings.from_config(config)
  num_envs = settings.total_envs(config)
  group_sizes(num_envs, settings.env_groups)
  if num_envs % config.batch_size:
    raise ValueError(f'config.batch_size ({config.batch_size}) must divide the number of '
                     f'environments ({num_envs} = single_machine.num_envs, or num_actors x '
                     'env.num_envs): each unroll of all environments is cut into batches.')
  if settings.algorithm == 'ppo':
    ppo_config = ppo.PPOConfig.from_dict(config.get('ppo') or {})
    units = ppo.minibatch_units(ppo_config, config.unroll_length, config.batch_size)
    if units % ppo_config.num_minibatches:
      what = (f'the {units} steps of one update (batch_size x unroll_length)'
              if ppo_config.minibatch_axis == 'samples' else
              f'config.batch_size ({units}), the environments of one update')
      raise ValueError(f'config.ppo.num_minibatches ({ppo_config.num_minibatches}) must divide '
                       f'{what}.')
  return settings


def make_update(settings: Settings, config, network, key):
  """(initial TrainingState, jitted update(state, batch), max non-finite steps in a row)."""
  if settings.algorithm == 'ppo':
    ppo_config = ppo.PPOConfig.from_dict(config.get('ppo') or {})
    return (ppo.init_training_state(network, ppo_config, key),
            ppo.make_ppo_update(network, ppo_config, seed=config.seed),
            ppo_config.max_nonfinite_in_a_row)
  learner_config = LearnerConfig.from_dict(config.learner)
  return (init_training_state(network, learner_config, key), make_sgd_step(network, learner_config),
          learner_config.max_nonfinite_in_a_row)


def _print(line: str) -> None:
  print(line, flush=True)


def pick_device(kind: str, log: Callable[[str], None] = _print):
  """The jax device for `kind`; 'auto' prefers an accelerator and says so when there is none."""
  if kind == 'auto':
    for platform in ('gpu', 'tpu'):
      try:
        return jax.devices(platform)[0]
      except RuntimeError:
        pass
    log('[train_single] WARNING: no GPU/TPU visible to JAX; policy and learner run on the CPU.')
    return jax.devices('cpu')[0]
  try:
    return jax.devices(kind)[0]
  except RuntimeError as e:
    raise ValueError(f'config.single_machine.device={kind!r}, but JAX sees no {kind} '
                     f'(platforms here: {sorted({d.platform for d in jax.devices()})}); use '
                     "'auto' or 'cpu'.") from e


class Published:
  """The parameters after each unroll's update, so that acting uses a fixed policy lag.

  `wait_for(i)` blocks until the learner finished unroll i (i = -1: the initial
  parameters) and returns (version, frames, params) as they were right then.
  """

  def __init__(self, version: int, frames: int, params, keep: int):
    self._cond = threading.Condition()
    self._done = -1
    self._by_unroll = {-1: (version, frames, params)}
    self._keep = keep  # snapshots kept (device memory): the policy lag + 2 is enough

  def publish(self, unroll: int, version: int, frames: int, params) -> None:
    with self._cond:
      self._by_unroll[unroll] = (version, frames, params)
      self._done = unroll
      for old in [k for k in self._by_unroll if k <= unroll - self._keep]:
        del self._by_unroll[old]
      self._cond.notify_all()

  def wait_for(self, unroll: int, should_stop: Callable[[], bool]):
    with self._cond:
      while self._done < unroll:
        if should_stop():
          return None
        self._cond.wait(0.2)
      return self._by_unroll[unroll]

  def latest(self):
    with self._cond:
      return self._by_unroll[self._done]


class LearnerThread(threading.Thread):
  """Consumes unrolls in order: `sgd_step` on each batch, counters, logs, checkpoints."""

  def __init__(self, state, counters: Counters, sgd_step, *, batch_size: int, frames_per_batch: int,
               stop_rule: StopRule, published: Published, checkpointer, logger, log_period_s: float,
               stop: threading.Event):
    super().__init__(name='learner', daemon=True)
    self.state, self.counters, self._sgd_step = state, counters, sgd_step
    self._batch_size, self._frames_per_batch = batch_size, frames_per_batch
    self._stop_rule, self._published = stop_rule, published
    self._checkpointer, self._logger, self._log_period_s = checkpointer, logger, log_period_s
    self._stop_event = stop
    self.unrolls: queue.Queue = queue.Queue()
    self.reason: Optional[str] = None
    self.error: Optional[BaseException] = None
    self.last_metrics: dict = {}
    self._stats = StepStats()

  def run(self) -> None:
    start = last_log = time.time()
    seconds_at_start = self.counters.train_seconds
    steps_at_log, frames_at_log = self.counters.learner_steps, self.counters.learner_frames
    metrics = None
    self.reason = self._stop_rule.reason(self.counters, 0.0)  # a resumed run may be done already
    try:
      while self.reason is None:
        t0 = time.time()
        try:
          unroll, trajectory, acted_version = self.unrolls.get(timeout=0.2)
        except queue.Empty:
          if self._stop_event.is_set():
            self.reason = 'stop requested'
          continue
        t1 = time.time()
        self._stats.wait_s += t1 - t0
        for batch in slice_batches(trajectory, self._batch_size):
          lag = self.counters.param_version - acted_version
          self.state, metrics = self._sgd_step(self.state, batch)
          c = self.counters
          c.learner_steps += 1
          c.param_version += 1
          c.items_consumed += self._batch_size
          c.learner_frames += self._frames_per_batch
          self._stats.add_lag(lag, lag)
          self.reason = self._stop_rule.reason(c, time.time() - start)
          if self.reason:
            break
        if self.reason is None:  # one scalar per unroll: skipped (non-finite) updates in a row
          self.reason = self._stop_rule.reason(self.counters, time.time() - start,
                                               int(metrics['nonfinite_in_a_row']))
        self._published.publish(unroll, self.counters.param_version,
                                self.counters.learner_frames, self.state.params)
        self.counters.train_seconds = seconds_at_start + time.time() - start
        self._stats.sgd_s += time.time() - t1
        if time.time() - last_log >= self._log_period_s:
          self._log(metrics, time.time() - last_log, self.counters.learner_steps - steps_at_log,
                    self.counters.learner_frames - frames_at_log)
          last_log, steps_at_log = time.time(), self.counters.learner_steps
          frames_at_log = self.counters.learner_frames
        self._checkpointer.maybe_save(self.counters.learner_steps, self.state,
                                      self.counters.as_dict())
    except BaseException as e:  # pylint: disable=broad-except  (reported by the main thread)
      self.error = e
      self.reason = self.reason or 'stop requested'
    finally:
      self._stop_event.set()
      self.counters.train_seconds = seconds_at_start + time.time() - start
      if self.error is None:
        saved = self._checkpointer.save(self.counters.learner_steps, self.state, self.counters.as_dict())
        if self.reason == 'non-finite':  # the state is that of the last finite step
          print(f'[train_single] {nonfinite_halt_message(self.counters, self._stop_rule.max_nonfinite_in_a_row, saved)}',
                file=sys.stderr, flush=True)
      self._log(metrics, time.time() - last_log, self.counters.learner_steps - steps_at_log,
                self.counters.learner_frames - frames_at_log, final=True,
                stop_reason_code=STOP_REASONS.index(self.reason) + 1)

  def _log(self, metrics, span: float, steps: int, frames: int, **extra) -> None:
    if metrics is not None:
      self.last_metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
    span = max(span, 1e-6)
    self._logger(dict(
        self.counters.as_dict(), steps_per_s=steps / span, frames_per_s=frames / span,
        **self._stats.record(), pid=os.getpid(),
        **{f'train/{k}': v for k, v in self.last_metrics.items()}, **extra))
    self._stats.reset()


@dataclasses.dataclass
class TrainResult:
  reason: str  # one of STOP_REASONS
  counters: dict  # the learner's final Counters
  env_steps: int  # agent steps acted in this process
  episodes: int  # episodes finished in this process
  seconds: float  # wall time of this process's training
  params: object  # final parameters (host numpy)
  network: object
  evaluations: list  # evaluator records (mean_return, param_version, frames, ...)


def _tensorboard_available(log) -> bool:
  try:
    import tensorflow  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    log('[train_single] TensorFlow is not installed: no TensorBoard events (metrics.jsonl only).')
    return False
  return True


def train(config, workdir: str, *, log: Callable[[str], None] = _print,
          on_episodes: Optional[Callable[[int, list], None]] = None,
          stop: Optional[threading.Event] = None) -> TrainResult:
  """Trains `config` in this process, writing into (and resuming from) `workdir`.

  Args:
    log: where console lines go (progress line, summary, warnings).
    on_episodes: called after each unroll with (agent steps so far, returns of the
      episodes that finished during it), e.g. for learning tests.
    stop: set it (from another thread or a signal handler) to stop; the learner
      saves a final checkpoint.
  Raises:
    ValueError: a bad config value or an unavailable device (nothing is written).
  """
  settings = validate_config(config)
  device = pick_device(settings.device, log)
  workdir = os.path.abspath(workdir)
  os.makedirs(workdir, exist_ok=True)
  stop = stop or threading.Event()
  num_actions, observation_shape = factory.env_spec(config.env)
  network = make_network(config.network.to_dict(), num_actions, observation_shape)
  params_key, actor_key, eval_key = jax.random.split(jax.random.PRNGKey(config.seed), 3)
  state, update, max_nonfinite = make_update(settings, config, network, params_key)
  checkpointer = checkpoint_lib.Checkpointer(
      workdir, interval_s=60.0 * config.checkpoint_minutes or 1e18, config=config,
      network_config=config.network.to_dict())
  state, counters = _resume(checkpointer, state, log, settings, config)
  state = jax.device_put(state, device)
  # A resumed run samples new actions, not those of its first run.
  actor_key = jax.random.fold_in(actor_key, counters.learner_steps)
  num_envs = settings.total_envs(config)
  sizes = group_sizes(num_envs, settings.env_groups)
  actor = _make_actor(config, sizes, network, actor_key, device)
  frames_per_step = factory.frames_per_step(config.env)
  tensorboard = _tensorboard_available(log)
  published = Published(counters.param_version, counters.learner_frames, state.params,
                        keep=settings.policy_lag + 2)
  learner = LearnerThread(
      state, counters, update, batch_size=config.batch_size,
      frames_per_batch=config.batch_size * config.unroll_length * frames_per_step,
      stop_rule=StopRule(config.max_frames, config.max_learner_steps, config.max_seconds,
                         max_nonfinite),
      published=published, checkpointer=checkpointer,
      logger=metrics_lib.record_logger(workdir, 'learner', 'learner_steps', 'learner_frames',
                                       tensorboard=tensorboard),
      log_period_s=config.log_period_s, stop=stop)
  eval_stop = threading.Event()  # set when training stops; cleared for the final evaluation
  evaluator = _make_evaluator(config, workdir, network, published, eval_key, eval_stop,
                              tensorboard, seed=actor_env_seed(config.seed, len(sizes), num_envs))
  counts = parameter_counts(state.params)
  log(f'[train_single] {settings.algorithm}, {config.network.kind} network ({sum(counts.values()):,} '
      f'parameters: inference {counts["inference"]:,}, policy {counts["policy"]:,}, value '
      f'{counts["value"]:,}) on {device.platform}:{device.id}; {num_envs} envs in {len(sizes)} groups, '
      f'observation {observation_shape}, unroll {config.unroll_length}, batch {config.batch_size}, '
      f'{num_envs // config.batch_size} updates per unroll, policy lag {settings.policy_lag} '
      f'unroll(s)')

  monitor = monitor_lib.RunMonitor(workdir, queue_size=1)
  printer = metrics_lib.ProgressPrinter(settings.progress_period_s, print_fn=log)
  actor_log = _ActorLog(workdir, config.log_period_s, frames_per_step)

  def show_progress():
    monitor.poll()
    printer.update(**monitor.progress_kwargs())

  learner.start()
  if evaluator is not None:
    evaluator_thread = threading.Thread(target=evaluator.run, name='evaluator', daemon=True)
    evaluator_thread.start()
  version, completed = counters.param_version, False
  try:
    version = _act(actor, learner, published, settings.policy_lag, stop, on_episodes, actor_log,
                   show_progress)
    completed = True
  finally:
    stop.set()
    learner.join()  # the learner saves a final checkpoint
    actor_log.write(actor, version, final=True)
    actor.close()
    if evaluator is not None:
      eval_stop.set()
      evaluator_thread.join()
      if completed and learner.error is None and learner.reason != 'stop requested':
        # One last evaluation of the final parameters (not when asked to stop: exit promptly).
        eval_stop.clear()
        evaluator.evaluate_once()
    seconds = actor_log.elapsed()
    monitor.poll()
    log(monitor_lib.format_summary(monitor, seconds,
                                   checkpoint_lib.latest_checkpoint(checkpointer.directory)))
  if learner.error is not None:
    raise learner.error
  return TrainResult(learner.reason, counters.as_dict(), actor.env_steps, actor.episodes, seconds,
                     jax.device_get(learner.state.params), network,
                     evaluator.results if evaluator is not None else [])


def _resume(checkpointer, state, log, settings: Settings, config) -> tuple:
  """(state, counters) of the latest checkpoint if there is one, else `state` and zero counters.

  Hyperparameters the config changed since the checkpoint was written take effect.
  """
  restored = checkpointer.restore_latest(state)
  if restored is None:
    return state, Counters()
  counters = Counters.from_checkpoint(restored.counters)
  log(f'[train_single] resumed from {restored.path}: {counters.as_dict()}')
  if settings.algorithm == 'ppo':
    section, current, names = 'ppo', ppo.PPOConfig.from_dict(config.get('ppo') or {}), ppo.OPTIMIZER_NAMES
  else:
    section, current, names = 'learner', LearnerConfig.from_dict(config.learner), None
  saved = (restored.config or {}).get(section)
  state, changes = resume_with_config(restored.state, saved, dataclasses.asdict(current), names)
  if changes:
    log(f'[train_single] {describe_config_changes(section, changes)}')
  return state, counters


def _make_actor(config, sizes: list, network, rng_key, device) -> DeviceActor:
  """The device actor over one environment batch per group (`sizes` environments each)."""
  envs = [factory.make_env(config.env, n, seed=actor_env_seed(config.seed, g, n))
          for g, n in enumerate(sizes)]
  return DeviceActor(envs, network, unroll_length=config.unroll_length, rng_key=rng_key,
                     device=device)


def _act(actor: DeviceActor, learner: 'LearnerThread', published: Published, policy_lag: int,
         stop: threading.Event, on_episodes: Optional[Callable[[int, list], None]],
         actor_log: '_ActorLog', show_progress: Callable[[], None]) -> int:
  """Collects unrolls until `stop`, each with the parameters `policy_lag` unrolls behind the
  learner's queue, and hands them to the learner; returns the version that acted last."""
  unroll, version = 0, published.latest()[0]
  while not stop.is_set():
    acted = published.wait_for(max(unroll - 1 - policy_lag, -1), stop.is_set)
    if acted is None:
      break
    version, _, params = acted
    trajectory = actor.collect(params)
    learner.unrolls.put((unroll, trajectory, version))
    unroll += 1
    actor_log.add_episodes(actor.finished)
    if on_episodes is not None:
      on_episodes(actor.env_steps, actor.finished)
    actor_log.maybe_write(actor, version)
    show_progress()
  return version


class _ActorLog:
  """The actor's metrics record (label `actor_0`) every `period_s`: the returns of the episodes
  since the last record, frames/s and the share of time in each acting phase."""

  def __init__(self, workdir: str, period_s: float, frames_per_step: int):
    self._log = metrics_lib.record_logger(workdir, 'actor_0', 'env_steps', 'frames')
    self._period_s, self._frames_per_step = period_s, frames_per_step
    self._start = self._last = time.time()
    self._window: list = []
    self._steps_at_last = 0

  def elapsed(self) -> float:
    return time.time() - self._start

  def add_episodes(self, returns: list) -> None:
    self._window += returns

  def maybe_write(self, actor: DeviceActor, version: int) -> None:
    if time.time() - self._last >= self._period_s:
      self.write(actor, version)

  def write(self, actor: DeviceActor, version: int, **extra) -> None:
    now = time.time()
    span = max(now - self._last, 1e-6)
    timers = dict(actor.timers)
    actor.timers = dict.fromkeys(timers, 0.0)
    self._log(actor_record(
        actor_id=0, env_steps=actor.env_steps, frames=actor.env_steps * self._frames_per_step,
        episodes=actor.episodes, window_returns=self._window,
        frames_per_s=(actor.env_steps - self._steps_at_last) * self._frames_per_step / span,
        param_version=version, elapsed_s=now - self._start, timers=timers, span=span, **extra))
    self._window, self._last, self._steps_at_last = [], now, actor.env_steps


class _FramesStamp:
  """Evaluator params source: host params of the newest update, remembering their frames."""

  def __init__(self, published: Published):
    self._published = published
    self.version_frames = (None, None)  # (param version, learner frames) last handed out

  def __call__(self):
    version, frames, params = self._published.latest()
    self.version_frames = (version, frames)
    return version, jax.device_get(params)

  def frames(self, version: int):
    """Learner frames of `version` if it is the one last handed out (it is, per evaluation)."""
    return self.version_frames[1] if self.version_frames[0] == version else None


def _make_evaluator(config, workdir, network, published, rng_key, stop, tensorboard, seed):
  if not config.evaluator.enabled:
    return None
  ev = config.evaluator
  source = _FramesStamp(published)
  log_eval = metrics_lib.record_logger(workdir, 'evaluator', 'param_version', 'frames',
                                       tensorboard=tensorboard)
  env = factory.make_env(config.env, ev.num_envs, seed=seed)
  evaluator = Evaluator(
      env, network, source, game=factory.game(config.env), rng_key=rng_key,
      period_s=ev.period_s, num_episodes=ev.num_episodes, greedy=ev.greedy,
      max_episode_steps=ev.max_episode_steps, should_stop=stop.is_set,
      wait=lambda seconds: stop.wait(seconds),
      logger=lambda record: log_eval(dict(record, frames=source.frames(record['param_version']))))
  return evaluator


# ------------------------------------------------------------------ command line
def main(argv) -> None:
  from absl import flags  # pylint: disable=g-import-not-at-top  (flags exist only when run as a script)
  if len(argv) > 1:
    cli.exit_error(f'unexpected arguments {argv[1:]}.')
  config = flags.FLAGS.config
  workdir = flags.FLAGS.workdir
  if config is None:
    cli.exit_error('--config is required, e.g. --config=experiments/catch.py.')
  if not workdir:
    cli.exit_error('--workdir is required.')
  try:
    validate_config(config)
  except ValueError as e:
    cli.exit_error(f'invalid config: {e}')
  try:
    cli.require_local_workdir(workdir, 'launch.train_single')
    cli.check_workdir(os.path.abspath(workdir), config.network.to_dict())
  except ValueError as e:
    cli.exit_error(str(e))

  logging.getLogger('jax._src.xla_bridge').setLevel(logging.WARNING)  # no 'rocm'/'tpu' INFO lines
  stop = threading.Event()
  received = cli.stop_on_signals(stop)
  code = 0
  try:
    result = train(config, workdir, stop=stop)
  except ValueError as e:  # e.g. a device that is not there (before anything is written)
    cli.exit_error(str(e))
  except KeyboardInterrupt:
    print('[train_single] interrupted twice: stopped without a final checkpoint.', flush=True)
    sys.exit(130)
  if received:
    name = {signal.SIGINT: 'interrupted by the user', signal.SIGTERM: 'terminated (SIGTERM)'}
    print(f'[train_single] {name[received[0]]}; saved a final checkpoint.', flush=True)
    code = cli.SIGNAL_EXIT_CODES[received[0]]
  elif result.reason == 'non-finite':
    code = 1
  sys.exit(code)


if __name__ == '__main__':
  # Flags are defined only when run as a script, so that importing `train` (tests, benchmarks)
  # does not claim --config/--workdir in the importer's flag namespace.
  from absl import app, flags  # pylint: disable=g-import-not-at-top
  from ml_collections import config_flags  # pylint: disable=g-import-not-at-top
  config_flags.DEFINE_config_file('config', None,
                                  'Experiment config file, e.g. experiments/catch.py[:arg].')
  flags.DEFINE_string('workdir', None, 'Directory for checkpoints, metrics and TensorBoard events.')
  app.run(main, flags_parser=cli.parse_flags)
