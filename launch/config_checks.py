"""Config checks shared by both trainers: one `ValueError` naming the first bad value.

`validate_common` covers what the distributed program (launch/program.py) and the
single-machine trainer (launch/train_single.py) read alike: the environment, the
network and learner fields, unroll/batch sizes, the stop condition, checkpoint
and log periods, and the evaluator. Each trainer adds its own fields.
"""

import numpy as np

from s3ta.envs import factory
from s3ta.learning import LearnerConfig
from s3ta.networks import NetworkConfig
from s3ta.utils import dataclass_config


def require_positive_ints(config, names) -> None:
  for name in names:
    value = config
    for part in name.split('.'):
      value = value[part]
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
      raise ValueError(f'config.{name} must be an integer >= 1, got {value!r}.')


def validate_common(config) -> None:
  """Raises ValueError naming the first bad value of the fields both trainers read."""
  dataclass_config.reject_nan(config, 'config')
  seed = config.get('seed', 0)
  if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or not 0 <= seed < 2**31:
    raise ValueError(f'config.seed must be an integer in [0, 2**31), got {seed!r}.')
  factory.validate(config.env)
  require_positive_ints(config, ('unroll_length', 'batch_size', 'env.num_envs'))
  for name in ('max_frames', 'max_seconds', 'max_learner_steps', 'checkpoint_minutes'):
    if not (np.isfinite(config[name]) and config[name] >= 0):
      raise ValueError(f'config.{name} must be a finite number >= 0, got '
                       f'{config[name]!r}.')
  if config.log_period_s <= 0:
    raise ValueError(f'config.log_period_s must be > 0, got {config.log_period_s!r}.')
  if not (config.max_frames or config.max_seconds or config.max_learner_steps):
    raise ValueError('Set at least one of config.max_frames, config.max_seconds, '
                     'config.max_learner_steps > 0, or the run never ends.')
  if config.evaluator.enabled:
    for name in ('num_episodes', 'num_envs'):
      if config.evaluator[name] < 1:
        raise ValueError(f'config.evaluator.{name} must be >= 1, got {config.evaluator[name]!r}.')
    if config.evaluator.period_s <= 0:
      raise ValueError(f'config.evaluator.period_s must be > 0, got {config.evaluator.period_s!r}.')
    if config.evaluator.max_episode_steps < 0:
      raise ValueError('config.evaluator.max_episode_steps must be >= 0, got '
                       f'{config.evaluator.max_episode_steps!r}.')
  NetworkConfig.from_dict(config.network)  # unknown fields / bad sizes
  LearnerConfig.from_dict(config.learner)


def validate_distributed(config) -> None:
  """`validate_common` plus the distributed program's fields (before anything is launched)."""
  try:
    _validate_distributed(config)
  except (KeyError, AttributeError) as e:  # ConfigDict's missing field
    name = str(e).strip('"\'').splitlines()[0]
    raise ValueError(f'the config has no field {name!r}, which the distributed program reads '
                     '(experiments/atari_expert.py lists them all).') from None


def _validate_distributed(config) -> None:
  validate_common(config)
  require_positive_ints(config, ('num_actors', 'queue_size', 'param_refresh_steps',
                                 'metrics_every_steps'))
  if config.actor_max_in_flight_items < 0:
    raise ValueError('config.actor_max_in_flight_items must be >= 0, got '
                     f'{config.actor_max_in_flight_items!r}.')
  if config.param_timeout_s <= 0:
    raise ValueError(f'config.param_timeout_s must be > 0, got {config.param_timeout_s!r}.')
  if not isinstance(config.sampler_in_flight_samples, int) or config.sampler_in_flight_samples < 0:
    raise ValueError('config.sampler_in_flight_samples must be an int >= 0 (0: twice the batch '
                     f'size), got {config.sampler_in_flight_samples!r}.')
  if config.sample_timeout_ms < 1:
    raise ValueError(f'config.sample_timeout_ms must be >= 1, got {config.sample_timeout_ms!r}.')
  if not isinstance(config.max_restarts, int) or config.max_restarts < 0:
    raise ValueError(f'config.max_restarts must be an int >= 0, got {config.max_restarts!r}.')
  if config.restart_backoff_s < 0:
    raise ValueError(f'config.restart_backoff_s must be >= 0, got {config.restart_backoff_s!r}.')
  validate_inference(config)
  if config.queue_size < config.batch_size:
    raise ValueError(f'config.queue_size ({config.queue_size}) must be >= config.batch_size '
                     f'({config.batch_size}): the learner could never fill a batch.')


INFERENCE_MODES = ('auto', 'actor', 'central')


def validate_inference(config) -> None:
  """`config.inference` of the distributed program (`launch/program.py`)."""
  inference = config.inference
  if inference.mode not in INFERENCE_MODES:
    raise ValueError(f'config.inference.mode must be one of {INFERENCE_MODES}, got '
                     f'{inference.mode!r}.')
  if not isinstance(inference.num_nodes, int) or inference.num_nodes < 1:
    raise ValueError('config.inference.num_nodes must be an integer >= 1 (central inference '
                     f'needs a node to run on), got {inference.num_nodes!r}.')
  if inference.num_nodes > config.num_actors:
    raise ValueError(f'config.inference.num_nodes ({inference.num_nodes}) must be <= '
                     f'config.num_actors ({config.num_actors}): a node without actors idles.')
  if not isinstance(inference.max_requests, int) or inference.max_requests < 0:
    raise ValueError('config.inference.max_requests must be an integer >= 0 (0: all actors '
                     f'of a node), got {inference.max_requests!r}.')
  if not 0 <= inference.wait_ms <= 1000:
    raise ValueError(f'config.inference.wait_ms must be in [0, 1000], got {inference.wait_ms!r}.')
  if inference.timeout_s <= 0:
    raise ValueError(f'config.inference.timeout_s must be > 0, got {inference.timeout_s!r}.')
  if not isinstance(inference.colocated, bool):
    raise ValueError(f'config.inference.colocated must be True or False, got {inference.colocated!r}.')
  if inference.colocated and inference.num_nodes != 1:
    raise ValueError('config.inference.colocated serves inference from the learner process, '
                     f'one node: config.inference.num_nodes must be 1, got {inference.num_nodes}.')
