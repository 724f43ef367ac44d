"""The distributed learner: samples trajectory batches from Reverb and runs `sgd_step`.

The pure update lives in `learner_core.py`; this module holds the side effects:
the Reverb iterator, counters, parameter serving (`get_params` over courier),
logging, periodic/at-stop checkpoints and the stop condition (DESIGN.md §5.2).

Runs the jitted step on the best device JAX sees (the first of `jax.devices()`:
GPU/TPU when present, else CPU). Batches arrive batch-major [B, T + 1, ...] and
are swapped to time-major inside the jitted step.
"""

import dataclasses
import gc
import os
import sys
import time
from typing import Any, Callable, Optional

import jax
import numpy as np

from s3ta.learning.learner_core import (LearnerConfig, describe_config_changes,
                                        init_training_state, make_sgd_step, resume_with_config)
from s3ta.learning.progress import (STOP_REASONS, Counters, StepStats, StopRule,
                                    nonfinite_halt_message)
from s3ta.learning.publishing import ParamsPublisher
from s3ta.types import Trajectory
from s3ta.replay import queue as replay


class Learner:
  """Courier-served learner. Public methods are RPCs; `run()` is the training loop.

  Args:
    network: the `Network` (already built for the env's action count / frame shape).
    learner_config: `LearnerConfig` (or a dict for `LearnerConfig.from_dict`).
    batch_size: trajectories per sgd step (B).
    unroll_length: T (items hold T + 1 steps).
    frames_per_step: environment frames per agent step (the action repeat).
    rng_key: PRNG key for parameter initialisation.
    server_address: Reverb server address ('host:port'), or None for tests that
      feed batches through `step_on_batch`.
    should_stop: returns True when the program is stopping (lp.stop_event().is_set).
    stop_program: called once when the learner's stop condition is met (lp.stop).
    checkpointer: `s3ta.utils.checkpoint.Checkpointer` (atomic, in `<workdir>/checkpoints`;
      its `interval_s` is the checkpoint period), or None. The latest checkpoint is
      restored at construction, counters included.
    logger: callable(dict) writing one metrics record, or None.
    max_frames / max_seconds / max_steps: stop condition (0 = unbounded).
    log_period_s: seconds between metrics records.
    sample_timeout_ms: how long the iterator waits for data before the loop checks
      `should_stop` (so dead actors or a stopping program never hang it).
    metrics_every_steps: `run` fetches the step's metrics to the host every this many
      steps (and at each log); between fetches the loop does not wait for the device, so
      converting the next batch overlaps the current step. The non-finite guard then
      halts up to this many steps late (skipped steps change nothing).
    exit_if_sampler_stuck: when the Reverb sampler does not close after the final save,
      end the process (a program node: nothing is left to do, and its exit would hang);
      False: `run` returns anyway and `sampler_closed` says so (a benchmark that reports
      after the loop).
    sampler_in_flight_samples: items the Reverb sampler requests ahead of use (0: twice
      `batch_size`); fewer lower the policy lag when the queue is full.
  """

  def __init__(self, network, learner_config, *, batch_size: int, unroll_length: int,
               frames_per_step: int = 1, rng_key=None, server_address: Optional[str] = None,
               should_stop: Callable[[], bool] = lambda: False,
               stop_program: Callable[[], None] = lambda: None, checkpointer=None,
               logger: Optional[Callable[[dict], None]] = None, max_frames: int = 0,
               max_seconds: float = 0.0, max_steps: int = 0,
               log_period_s: float = 10.0, sample_timeout_ms: int = 1000,
               metrics_every_steps: int = 1, exit_if_sampler_stuck: bool = True,
               sampler_in_flight_samples: int = 0):
    if not isinstance(learner_config, LearnerConfig):
      learner_config = LearnerConfig.from_dict(learner_config)
    if batch_size < 1:
      raise ValueError(f'batch_size must be >= 1, got {batch_size}.')
    if not isinstance(metrics_every_steps, int) or metrics_every_steps < 1:
      raise ValueError(f'metrics_every_steps must be an integer >= 1, got {metrics_every_steps!r}.')
    self._metrics_every_steps = metrics_every_steps
    self._exit_if_sampler_stuck = exit_if_sampler_stuck
    self.sampler_closed: Optional[bool] = None  # after `run`: whether the sampler closed
    self._network = network
    self._config = learner_config
    self._batch_size = batch_size
    self._unroll_length = unroll_length
    self._frames_per_step = frames_per_step
    self._server_address = server_address
    self._should_stop = should_stop
    self._stop_program = stop_program
    self._checkpointer = checkpointer
    self._logger = logger
    self._stop_rule = StopRule(max_frames, max_steps, max_seconds,
                               learner_config.max_nonfinite_in_a_row)
    self._log_period_s = log_period_s
    self._sample_timeout_ms = sample_timeout_ms
    self._sampler_in_flight_samples = sampler_in_flight_samples
    self._max_sample_failures = 30  # consecutive Reverb errors (about 30 s) before giving up
    self.device = jax.devices()[0]

    key = rng_key if rng_key is not None else jax.random.PRNGKey(0)
    state = init_training_state(network, learner_config, jax.numpy.asarray(key, np.uint32))
    self.counters = Counters()
    self.resumed_from = None
    if checkpointer is not None:
      restored = checkpointer.restore_latest(state)
      if restored is not None:
        saved = (restored.config or {}).get('learner')
        state, changes = resume_with_config(restored.state, saved,
                                            dataclasses.asdict(learner_config))
        if changes:
          print(f'[learner] {describe_config_changes("learner", changes)}', flush=True)
        self.counters = Counters.from_checkpoint(restored.counters)
        self.resumed_from = restored.path
    self._state = jax.device_put(state, self.device)
    self._publisher = ParamsPublisher()

    core = make_sgd_step(network, learner_config, jit=False)

    def sgd_step(state, batch: Trajectory):
      return core(state, replay.time_major(batch))

    self._sgd_step = jax.jit(sgd_step)
    self._state_treedef = jax.tree_util.tree_structure(network.initial_state(1))
    self._stats = StepStats()
    self.last_metrics: dict = {}

  # ---------------------------------------------------------------- RPCs
  def get_params(self, known_version: int = -1) -> dict:
    """{'version': int, 'params': numpy pytree} of the current parameters.

    `params` is None when `known_version` is already the current version (saves
    sending unchanged parameters to an actor).
    """
    version, params = self.current_params
    return self._publisher.get(version, params, known_version)

  @property
  def current_params(self) -> tuple[int, Any]:
    """(version, parameters on the learner's device), for consumers in this process."""
    return int(self.counters.param_version), self._state.params

  def get_counts(self) -> dict:
    return self.counters.as_dict()

  # ---------------------------------------------------------------- training
  def step_on_batch(self, data: dict, fetch_metrics: bool = True) -> dict:
    """One sgd step on a sampled batch (dict of [B, ...] item columns).

    Returns the step's metrics as floats; with `fetch_metrics=False` the step is only
    dispatched (no wait for the device) and the last fetched metrics are returned.
    """
    trajectory, extras = replay.batch_to_trajectory(data, self._state_treedef)
    start = time.time()
    self._state, metrics = self._sgd_step(self._state, trajectory)
    if fetch_metrics:
      self.last_metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
    self._stats.sgd_s += time.time() - start
    c = self.counters
    lag = c.param_version - np.asarray(extras['param_version']).min(axis=-1)
    self._stats.add_lag(lag.mean(), lag.max())
    c.learner_steps += 1
    c.param_version += 1
    c.items_consumed += self._batch_size
    c.learner_frames += self._batch_size * self._unroll_length * self._frames_per_step
    return self.last_metrics

  def _log(self, client, since: float, steps_since: int, frames_since: int, **extra):
    now = time.time()
    span = max(now - since, 1e-6)
    record = dict(self.counters.as_dict(),
                  steps_per_s=steps_since / span, frames_per_s=frames_since / span,
                  **self._stats.record(),
                  queue_size=replay.queue_size(client) if client is not None else -1,
                  pid=os.getpid(), **{f'train/{k}': v for k, v in self.last_metrics.items()},
                  **extra)
    self._stats.reset()
    if self._logger is not None:
      self._logger(record)
    return record

  def save(self) -> Optional[str]:
    if self._checkpointer is None:
      return None
    return self._checkpointer.save(self.counters.learner_steps, jax.device_get(self._state),
                                   self.counters.as_dict())

  def run(self) -> str:
    """Trains until the stop condition or a stop request; returns the reason (STOP_REASONS)."""
    # Reverb/TF only here: the learning core stays importable without them.
    import reverb  # pylint: disable=g-import-not-at-top
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    try:  # Reverb's dataset is the only TF user here: keep its thread pools small (trap 7).
      tf.config.threading.set_inter_op_parallelism_threads(2)
      tf.config.threading.set_intra_op_parallelism_threads(2)
    except RuntimeError:
      pass
    client = reverb.Client(self._server_address)
    replay.wait_for_server(client, self._should_stop)
    start = last_log = time.time()
    train_seconds_at_start = self.counters.train_seconds
    steps_at_log, frames_at_log = self.counters.learner_steps, self.counters.learner_frames
    reason = None
    sampler = replay.BatchSampler(self._server_address, self._batch_size,
                                  timeout_ms=self._sample_timeout_ms, should_stop=self._should_stop,
                                  max_failures=self._max_sample_failures,
                                  max_in_flight_samples=self._sampler_in_flight_samples)
    try:
      while reason is None:
        if self._should_stop():
          reason = 'stop requested'
          break
        t0 = time.time()
        sample = sampler.next()
        if sample is None:  # no data yet (or Reverb unavailable): re-check stop, then retry
          continue
        self._stats.wait_s += time.time() - t0
        now = time.time()
        fetch = (not self.last_metrics or now - last_log >= self._log_period_s or
                 (self.counters.learner_steps + 1) % self._metrics_every_steps == 0)
        self.step_on_batch(sample.data, fetch_metrics=fetch)
        self.counters.train_seconds = train_seconds_at_start + time.time() - start
        reason = self._stop_rule.reason(self.counters, time.time() - start,
                                        int(self.last_metrics.get('nonfinite_in_a_row', 0)))
        now = time.time()
        if now - last_log >= self._log_period_s:
          self._log(client, last_log, self.counters.learner_steps - steps_at_log,
                    self.counters.learner_frames - frames_at_log)
          last_log = now
          steps_at_log, frames_at_log = self.counters.learner_steps, self.counters.learner_frames
        if self._checkpointer is not None:
          self._checkpointer.maybe_save(self.counters.learner_steps, self._state,
                                        self.counters.as_dict())
    except BaseException:
      sampler.close()
      raise
    stopping = time.time()
    self.counters.train_seconds = train_seconds_at_start + time.time() - start
    saved = self.save()  # after non-finite steps: the last finite parameters
    if reason == 'non-finite':
      print(f'[learner] {nonfinite_halt_message(self.counters, self._stop_rule.max_nonfinite_in_a_row, saved)}',
            file=sys.stderr, flush=True)
    self._log(None, last_log, self.counters.learner_steps - steps_at_log,
              self.counters.learner_frames - frames_at_log, final=True,
              stop_reason_code=STOP_REASONS.index(reason) + 1)
    closed = self.sampler_closed = sampler.close()  # after the save: can hang if replay is gone
    del client
    gc.collect()
    print(f'[learner] {reason} at step {self.counters.learner_steps}; saved and cleaned up in '
          f'{time.time() - stopping:.1f} s', flush=True)
    if reason != 'stop requested':
      self._stop_program()
    if not closed and self._exit_if_sampler_stuck:
      _exit_past_stuck_sampler()
    return reason


def _exit_past_stuck_sampler() -> None:
  """Ends the process now: a Reverb sampler whose server went down mid-sample never closes.

  Its drop blocks in Reverb's retry loop and would hold the process past the program's
  termination notice (then everything is SIGKILLed, the launcher included). Everything
  is saved and logged by now, so leave without running the interpreter's shutdown.
  """
  print('[learner] the Reverb sampler did not close (the replay node stopped mid-sample); '
        'exiting without waiting for it', flush=True)
  sys.stderr.flush()
  os._exit(0)  # pylint: disable=protected-access
