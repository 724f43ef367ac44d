"""The distributed S3TA/IMPALA program: `make_program(config, workdir) -> lp.Program`.

Nodes: `replay` (a Reverb FIFO queue), `learner` (samples, runs `sgd_step`, serves
parameters, checkpoints, stops the program), `actor` x N (EnvPool batches; policy on
their CPU or on the central `inference` x K nodes), and an optional `evaluator`.
Actor and evaluator nodes are supervised (restarted when they die, launch/supervision.py).
Each node builds what it needs itself through the module-level `build_*` functions
(shared with launch/pbt.py), so only the config, workdir and env spec cross processes.
Also here: per-node resources for `local_mp` and for Vertex AI. The data flow and the
reasons are in WORKSPACE.md ("The distributed program").
"""

import functools
import os
import subprocess
import sys
import tempfile
import threading
from typing import Any, Callable, Optional

import s3ta  # noqa: F401  pylint: disable=unused-import  (rlax before TF/Reverb)

import jax
import launchpad as lp
from launchpad.nodes.python.local_multi_processing import PythonProcess
import reverb

from launch import config_checks
from launch import seeds
from launch import supervision
from s3ta.acting.actor import Actor, CourierParamsSource
from s3ta.acting.evaluator import Evaluator
from s3ta.acting.inference import InferenceServer
from s3ta.acting.policy import RemotePolicy
from s3ta.envs import factory
from s3ta.learning.learner import Learner
from s3ta.networks import make_network
from s3ta.replay import TrajectoryQueueWriter, make_queue_tables_fn
from s3ta.utils import metrics as metrics_lib
from s3ta.utils.checkpoint import Checkpointer
from s3ta.utils import storage

# Environment variables of node processes that should not see an accelerator.
CPU_NODE_ENV = {'JAX_PLATFORMS': 'cpu', 'CUDA_VISIBLE_DEVICES': '', 'TF_CPP_MIN_LOG_LEVEL': '2'}


# Environment variables of a central inference node: it shares the learner's accelerator,
# so it allocates as it goes instead of reserving most of the memory up front.
INFERENCE_NODE_ENV = {'XLA_PYTHON_CLIENT_PREALLOCATE': 'false', 'TF_CPP_MIN_LOG_LEVEL': '2'}


@functools.lru_cache(maxsize=None)
def _local_backend() -> str:
  """JAX's default backend on this machine, probed in a child process (the launcher itself
  must not claim the accelerator's memory)."""
  if os.environ.get('JAX_PLATFORMS', '').strip().lower() == 'cpu':
    return 'cpu'
  try:
    probe = subprocess.run([sys.executable, '-c', 'import jax; print(jax.default_backend())'],
                           capture_output=True, text=True, timeout=120, check=True)
  except (subprocess.SubprocessError, OSError):
    return 'cpu'
  return probe.stdout.strip().splitlines()[-1] if probe.stdout.strip() else 'cpu'


def inference_mode(config, local: bool = True) -> str:
  """'actor' or 'central': `config.inference.mode`, with 'auto' resolved by whether the
  learner has an accelerator (this machine's for local runs, `config.resources` otherwise)."""
  mode = config.inference.mode
  if mode != 'auto':
    return mode
  has_accelerator = (_local_backend() != 'cpu') if local else bool(
      config.resources.learner_accelerator)
  return 'central' if has_accelerator else 'actor'


# ------------------------------------------------------------------ node builders
# Each runs inside its node's process and takes what varies as
# arguments, so that `make_program` and `launch/pbt.py` (one member each) share them.
# `network_fn` is a () -> Network callable, e.g. a `functools.partial(build_network, ...)`.
def build_network(config, num_actions: int, observation_shape: tuple):
  """The agent `Network` of `config.network` for the env's action count and frame shape."""
  return make_network(config.network.to_dict(), num_actions, observation_shape)


def build_replay_tables(config, network_fn: Callable[[], Any]):
  """The Reverb FIFO queue table (its item signature comes from `network_fn()`)."""
  return make_queue_tables_fn(network_fn, config.unroll_length, config.queue_size)()


def build_replay_checkpointer(path: Optional[str]):
  """The Reverb checkpointer writing into `path` (None: the node's own temp directory, for
  a remote workdir: Reverb writes local files only)."""
  # Trap 6: without a checkpointer every reverb.Server makes a /tmp dir.
  return reverb.checkpointers.DefaultCheckpointer(
      path=path or os.path.join(tempfile.gettempdir(), 'reverb'))


def build_learner(config, workdir: str, network_fn: Callable[[], Any], replay_client, *,
                  learner_cls=None, stop_program: Optional[Callable[[], None]] = None,
                  name: str = 'learner', **learner_kwargs):
  """The learner of `config`, checkpointing into (and resuming from) `workdir`.

  Args:
    learner_cls: `Learner` (the default) or a subclass such as `PBTLearner`.
    stop_program: called when the learner's stop condition is met (`lp.stop` in the
      single-agent program); None: the learner never stops the program (PBT: the
      controller does).
    name: the learner's name in its console lines.
    **learner_kwargs: extra constructor arguments of `learner_cls`.
  """
  learner_cls = learner_cls or Learner
  stop_event = lp.stop_event()
  checkpointer = Checkpointer(workdir, interval_s=60.0 * config.checkpoint_minutes or 1e18,
                              config=config, network_config=config.network.to_dict())
  learner = learner_cls(
      network_fn(), config.learner.to_dict(), batch_size=config.batch_size,
      unroll_length=config.unroll_length, frames_per_step=factory.frames_per_step(config.env),
      rng_key=seeds.actor_keys(config.seed, config.num_actors)[config.num_actors],
      server_address=replay_client.server_address, should_stop=stop_event.is_set,
      stop_program=stop_program or (lambda: None), checkpointer=checkpointer,
      logger=metrics_lib.record_logger(workdir, 'learner', 'learner_steps', 'learner_frames',
                                 tensorboard=True),
      max_frames=config.max_frames, max_seconds=config.max_seconds,
      max_steps=config.max_learner_steps, log_period_s=config.log_period_s,
      sample_timeout_ms=config.sample_timeout_ms,
      sampler_in_flight_samples=config.sampler_in_flight_samples,
      metrics_every_steps=config.metrics_every_steps, **learner_kwargs)
  if learner.resumed_from:
    print(f'[{name}] resumed from {learner.resumed_from}: {learner.get_counts()}', flush=True)
  return learner


def _node_stop_event(stop_event: Optional[threading.Event]) -> threading.Event:
  """`stop_event`, or the Launchpad node's own (the builder runs inside a node process)."""
  return lp.stop_event() if stop_event is None else stop_event


def build_actor(config, workdir: str, network_fn: Callable[[], Any], actor_id: int,
                replay_client, learner_client, inference_client=None, *, env_config=None,
                label: Optional[str] = None,
                on_episodes: Optional[Callable[[list], Optional[dict]]] = None,
                stop_event: Optional[threading.Event] = None, attempt: int = 0):
  """Actor `actor_id` of `config`, logging into `workdir` as `label` (default `actor_<id>`).

  Args:
    inference_client: courier client of this actor's central inference node; None: the
      actor runs the policy itself with parameters from `learner_client`.
    env_config: the env settings of this actor (default `config.env`; PBT: a per-actor game).
    on_episodes: the `Actor`'s finished-episode hook.
    stop_event: ends the actor when set (default: the Launchpad node's).
    attempt: 0, or the restart number of a supervised worker (its own PRNG and env seeds).
  """
  stop_event = _node_stop_event(stop_event)
  num_envs = config.env.num_envs
  env_config = config.env if env_config is None else env_config
  env_seed = seeds.actor_env_seed(seeds.restart_seed(config.seed, attempt), actor_id, num_envs)
  env = factory.make_env(env_config, num_envs, env_seed)
  writer = TrajectoryQueueWriter(replay_client, config.actor_max_in_flight_items,
                                 should_stop=stop_event.is_set)
  network = network_fn()
  policy = None
  if inference_client is not None:
    policy = RemotePolicy(inference_client, actor_id,
                          jax.tree_util.tree_structure(network.initial_state(1)),
                          should_stop=stop_event.is_set, name=label or f'actor_{actor_id}')
  return Actor(actor_id, env, network, CourierParamsSource(learner_client), writer,
               unroll_length=config.unroll_length,
               rng_key=seeds.restart_key(seeds.actor_keys(config.seed, config.num_actors)[actor_id],
                                         attempt),
               param_refresh_steps=config.param_refresh_steps, should_stop=stop_event.is_set,
               logger=metrics_lib.record_logger(workdir, label or f'actor_{actor_id}', 'env_steps',
                                          'frames'),
               log_period_s=config.log_period_s,
               frames_per_step=factory.frames_per_step(env_config), on_episodes=on_episodes,
               policy=policy)


class LearnerServingInference:
  """The learner node with central inference colocated (`config.inference.colocated`).

  Serves the learner's RPCs and the inference node's `step` from one process: the
  `InferenceServer` runs in a thread beside the training loop and takes the learner's
  parameters straight from its device (no host copy, no courier fetch).
  """

  def __init__(self, learner, make_server: Callable[..., InferenceServer]):
    self._learner = learner
    self._done = threading.Event()
    self._server = make_server(lambda: learner.current_params, self._done.is_set)

  def get_params(self, known_version: int = -1) -> dict:
    return self._learner.get_params(known_version)

  def get_counts(self) -> dict:
    return self._learner.get_counts()

  def save(self):
    return self._learner.save()

  def step(self, actor_id: int, seq: int, inputs: dict, want_state: bool = False,
           reset: bool = False) -> dict:
    return self._server.step(actor_id, seq, inputs, want_state, reset)

  def run(self) -> str:
    thread = threading.Thread(target=self._server.run, name='inference', daemon=True)
    thread.start()
    try:
      return self._learner.run()
    finally:
      self._done.set()
      thread.join(timeout=30)


def inference_actors(config, node_id: int) -> list[int]:
  """The actors central inference node `node_id` serves (actor i -> node i % num_nodes)."""
  return list(range(node_id, config.num_actors, config.inference.num_nodes))


def make_inference_server(config, workdir: str, network_fn: Callable[[], Any], node_id: int,
                          params_source, also_stop: Callable[[], bool] = lambda: False):
  """Central inference server `node_id` of `config` on this process's best device."""
  stop_event = lp.stop_event()
  return InferenceServer(
      network_fn(), params_source, rng_key=seeds.inference_key(config.seed, node_id),
      max_requests=config.inference.max_requests or len(inference_actors(config, node_id)),
      wait_ms=config.inference.wait_ms,
      should_stop=lambda: stop_event.is_set() or also_stop(),
      logger=metrics_lib.record_logger(workdir, f'inference_{node_id}', 'requests'),
      log_period_s=config.log_period_s, request_timeout_s=config.inference.timeout_s)


def build_inference(config, workdir: str, network_fn: Callable[[], Any], node_id: int,
                    learner_client):
  """Central inference node `node_id`, fetching parameters from the learner."""
  return make_inference_server(config, workdir, network_fn, node_id,
                               CourierParamsSource(learner_client))


def build_learner_serving_inference(config, workdir: str, network_fn: Callable[[], Any],
                                    replay_client, **learner_kwargs):
  """The learner node with central inference colocated (see `LearnerServingInference`)."""
  learner = build_learner(config, workdir, network_fn, replay_client, **learner_kwargs)
  return LearnerServingInference(
      learner, functools.partial(make_inference_server, config, workdir, network_fn, 0))


def build_evaluator(config, workdir: str, network_fn: Callable[[], Any], learner_client, *,
                    stop_event: Optional[threading.Event] = None, attempt: int = 0):
  """The periodic evaluator of `config`, logging into `workdir` (arguments as `build_actor`)."""
  stop_event = _node_stop_event(stop_event)
  ev = config.evaluator
  # The env's own limit stays the game's; the evaluator cuts (and flags) longer episodes.
  env = factory.make_env(config.env, ev.num_envs,
                         seeds.actor_env_seed(seeds.restart_seed(config.seed, attempt),
                                              config.num_actors, config.env.num_envs))
  rng_key = seeds.actor_keys(config.seed, config.num_actors)[config.num_actors + 1]
  return Evaluator(env, network_fn(), CourierParamsSource(learner_client),
                   game=factory.game(config.env), rng_key=seeds.restart_key(rng_key, attempt),
                   period_s=ev.period_s, num_episodes=ev.num_episodes, greedy=ev.greedy,
                   max_episode_steps=ev.max_episode_steps, should_stop=stop_event.is_set,
                   wait=stop_event.wait,
                   logger=metrics_lib.record_logger(workdir, 'evaluator', 'param_version',
                                              tensorboard=True))


def build_supervisor(config, workdir: str, name: str, build_worker: Callable, *args):
  """A node body that runs `build_worker(*args)` in a restarted child (`launch.supervision`).

  `args` are the builder's positional arguments after Launchpad dereferenced them
  (Reverb and courier clients pickle as their addresses).
  """
  return supervision.Supervisor(
      name, functools.partial(build_worker, *args), max_restarts=config.max_restarts,
      backoff_s=config.restart_backoff_s,
      logger=metrics_lib.record_logger(workdir, supervision.SUPERVISOR_PREFIX + name, 'restarts'))


# ------------------------------------------------------------------ the program
def make_program(config, workdir: str, local: bool = True):
  """Builds (does not launch) the Launchpad program for `config`, writing into `workdir`.

  `local`: a `local_mp` launch on this machine ('auto' inference probes its accelerator).
  """

  config_checks.validate_distributed(config)
  workdir = storage.absolute(workdir)
  config = config.copy_and_resolve_references() if hasattr(
      config, 'copy_and_resolve_references') else config
  num_actions, observation_shape = factory.env_spec(config.env)
  network_fn = functools.partial(build_network, config, num_actions, observation_shape)
  # The node builders: the module-level ones with this program's arguments bound.
  build_replay = functools.partial(build_replay_tables, config, network_fn)
  build_checkpointer = functools.partial(
      build_replay_checkpointer,
      None if storage.is_remote(workdir) else os.path.join(workdir, 'reverb'))
  mode = inference_mode(config, local)
  colocated = mode == 'central' and config.inference.colocated
  build_learner_node = functools.partial(
      build_learner_serving_inference if colocated else build_learner, config, workdir,
      network_fn, stop_program=lp.stop)
  build_actor_node = functools.partial(build_actor, config, workdir, network_fn)
  build_evaluator_node = functools.partial(build_evaluator, config, workdir, network_fn)
  build_inference_node = functools.partial(build_inference, config, workdir, network_fn)
  supervised = functools.partial(build_supervisor, config, workdir)

  program = lp.Program('s3ta')
  with program.group('replay'):
    replay = program.add_node(lp.ReverbNode(build_replay, checkpoint_ctor=build_checkpointer))
  # Each actor call waiting for its inference batch holds a courier thread.
  inference_threads = {'thread_pool_size': max(16, 2 * config.num_actors + 4)}
  with program.group('learner'):
    learner = program.add_node(lp.CourierNode(
        build_learner_node, replay, courier_kwargs=inference_threads if colocated else None))
  # Trap 2: courier clients otherwise wait for a dead learner forever.
  timeout = config.inference.timeout_s if colocated else config.param_timeout_s
  learner.set_client_kwargs(call_timeout=float(timeout))
  inference = [learner] if colocated else []
  if mode == 'central' and not colocated:
    with program.group('inference'):
      for node_id in range(config.inference.num_nodes):
        node = program.add_node(lp.CourierNode(build_inference_node, node_id, learner,
                                               courier_kwargs=inference_threads))
        node.set_client_kwargs(call_timeout=float(config.inference.timeout_s))
        inference.append(node)
  with program.group('actor'):
    for actor_id in range(config.num_actors):
      served_by = (inference[actor_id % len(inference)],) if inference else ()
      program.add_node(lp.PyClassNode(supervised, f'actor_{actor_id}', build_actor_node,
                                      actor_id, replay, learner, *served_by))
  if config.evaluator.enabled:
    with program.group('evaluator'):
      program.add_node(lp.PyClassNode(supervised, 'evaluator', build_evaluator_node, learner))
  return program


# ------------------------------------------------------------------ resources
def local_resources(config) -> dict:
  """Per-group `local_mp` process settings: everything but the learner is CPU-only."""
  resources = {label: PythonProcess(env=dict(CPU_NODE_ENV))
               for label in ('replay', 'actor', 'evaluator')}
  resources['learner'] = PythonProcess(env={'TF_CPP_MIN_LOG_LEVEL': '2'})
  resources['inference'] = PythonProcess(env=dict(INFERENCE_NODE_ENV))
  del config
  return resources


def resource_spec(config) -> dict:
  """Per-group cluster resources from `config.resources` (plain dicts; no xmanager needed).

  Central inference nodes get one accelerator of the learner's type each.
  """
  r = config.resources
  spec = {
      'replay': {'cpu': r.replay_cpu, 'memory_gib': r.replay_memory_gib},
      'learner': {'cpu': r.learner_cpu, 'memory_gib': r.learner_memory_gib},
      'actor': {'cpu': r.actor_cpu, 'memory_gib': r.actor_memory_gib},
  }
  if r.learner_accelerator:
    spec['learner']['accelerator'] = r.learner_accelerator
    spec['learner']['accelerator_count'] = int(r.learner_accelerator_count)
  if config.evaluator.enabled:
    spec['evaluator'] = {'cpu': r.evaluator_cpu, 'memory_gib': r.evaluator_memory_gib}
  if inference_mode(config, local=False) == 'central':
    spec['inference'] = {'cpu': r.inference_cpu, 'memory_gib': r.inference_memory_gib}
    if r.learner_accelerator:
      spec['inference'].update(accelerator=r.learner_accelerator, accelerator_count=1)
  for label, values in spec.items():
    for key, value in values.items():
      if key != 'accelerator' and value < 1:
        raise ValueError(f'config.resources for {label!r}: {key} must be >= 1, got {value!r}.')
  return spec


def xm_resources(config, code_directory: str, requirements: str,
                 gpu_requirements: Optional[str] = None) -> dict:
  """`xm_resources` for `lp.launch(..., launch_type='vertex_ai')`: a DockerConfig per group.

  Groups with an accelerator install `gpu_requirements` (default: `requirements`), the
  others `requirements`. Needs the `xmanager` package (`pip install -e .[cluster]`).
  """
  try:
    # Imported here: xmanager is the optional `cluster` extra, never needed by local runs.
    from xmanager import xm  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError('The Vertex AI launch needs the xmanager package (pip install -e '
                      '.[cluster]) and a GCP project (see launch/README.md).') from e
  resources = {}
  for label, spec in resource_spec(config).items():
    requirements_kwargs = {'cpu': spec['cpu'], 'memory': spec['memory_gib'] * xm.GiB}
    if spec.get('accelerator'):
      requirements_kwargs[spec['accelerator']] = spec['accelerator_count']
    try:
      hw_requirements = xm.JobRequirements(**requirements_kwargs)
    except KeyError as e:  # xmanager's own error names the unknown resource type
      valid = ', '.join(t.name.lower() for t in xm.ResourceType
                        if t.name not in ('CPU', 'MEMORY', 'EPHEMERAL_STORAGE', 'LOCAL_GPU'))
      raise ValueError(f'config.resources accelerator {spec["accelerator"]!r} of {label!r} is not '
                       f'an accelerator xmanager knows; valid: {valid}.') from e
    group_requirements = (gpu_requirements or requirements) if spec.get('accelerator') else requirements
    resources[label] = lp.DockerConfig(code_directory, group_requirements,
                                       hw_requirements=hw_requirements)
  return resources
