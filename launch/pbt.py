"""Population-based training: M learners (each with its own Reverb queue and actors) + a controller.

Usage:
  python -m launch.pbt --config=experiments/pbt_smoke.py --workdir=DIR [--config.population_size=3]

`make_pbt_program(config, workdir) -> lp.Program` builds one Launchpad program: per member m
(`<workdir>/member_<m>/`) a Reverb queue node, a `PBTLearner` courier node and `num_actors`
supervised actors that feed only that queue; plus one `pbt_controller` node
(`s3ta.pbt.node.ControllerNode`) that polls fitness and applies exploit (`set_state`) and
explore (`set_hyperparams`). `config.games` (a `s3ta.pbt.levels.GAME_LISTS` name or
'Game1,Game2') makes it multi-level (paper 000, App. A.2). The controller alone calls
`lp.stop()`, once every learner is done or after `pbt_max_seconds`; relaunching with the same
workdir resumes the controller from `pbt_state.json` and each learner from its checkpoints.
Design (one Reverb server per member, fitness, the stop order): WORKSPACE.md, "Population-based
training".
"""

if __name__ == '__main__':  # first: re-executing now costs only the interpreter's start
  from launch import host_tuning  # pylint: disable=g-import-not-at-top
  host_tuning.reexec_with_host_tuning()  # glibc huge pages for XLA:CPU's buffers (host_tuning.py)

import copy
import functools
import os
import sys
import tempfile
import time

from absl import app
from absl import flags
from ml_collections import config_flags

import numpy as np

from launch import cli
from launch import config_checks
from launch import isolation  # defines --network
from s3ta.envs import factory
from s3ta.envs import human_scores
from s3ta.learning.learner_core import LearnerConfig
from s3ta.pbt import levels
from s3ta.pbt.config import PBTConfig

# Launchpad (and the modules that import it: launch.program, s3ta.pbt.learner/node) is
# imported inside functions: it reads LAUNCHPAD_LOGGING_DIR at import, which main sets.

_CONFIG = config_flags.DEFINE_config_file('config', None, 'PBT experiment config file (experiments/pbt_*.py).')
_WORKDIR = flags.DEFINE_string('workdir', None, 'Run directory (controller state, member subdirs, logs).')
_LAUNCH_TYPE = flags.DEFINE_enum('launch_type', 'local_mp', ['local_mp', 'test_mp'], 'Launchpad launch type.')

MEMBER_SEED_STRIDE = 1_000  # member m uses seed config.seed + m * stride


# ------------------------------------------------------------------ config
def pbt_config(config):
  """The validated `PBTConfig` of an experiment config (population size at the top level)."""
  values = dict(config.pbt.to_dict())
  if 'population_size' in values:
    raise ValueError('Set the population size as config.population_size, not config.pbt.population_size.')
  return PBTConfig.from_dict(dict(values, population_size=config.population_size))


def games_of(config) -> tuple:
  """The games of a multi-level config, or () for a single-game population."""
  return levels.resolve_games(config.games) if config.games else ()


def member_dir(workdir: str, member: int) -> str:
  """Member `member`'s own workdir (checkpoints, metrics) inside the population's."""
  return os.path.join(workdir, f'member_{member}')


def member_config(config, member: int):
  """The single-agent config of member `member` (its own seed)."""
  out = copy.deepcopy(config)
  out.seed = int(config.seed) + member * MEMBER_SEED_STRIDE
  games = games_of(config)
  if games:
    out.env.game = games[0]
    out.env.full_action_space = True  # one network for every game (18 actions)
  return out


def validate_pbt_config(config) -> None:
  """Raises ValueError naming the first bad value; imports no Launchpad/TF."""
  pbt = pbt_config(config)
  games = games_of(config)
  if games:
    levels.assign_games(config.num_actors, games)
  if config.fitness_window < 1:
    raise ValueError(f'config.fitness_window must be >= 1 episode, got {config.fitness_window!r}.')
  if config.pbt_max_seconds < 0:
    raise ValueError(f'config.pbt_max_seconds must be >= 0, got {config.pbt_max_seconds!r}.')
  for name, value in config.pbt_init_ranges.items():
    if name not in pbt.bounds:
      raise ValueError(f'Unknown hyperparameter {name!r} in config.pbt_init_ranges; valid: {sorted(pbt.bounds)}.')
    if not (isinstance(value, (tuple, list)) and len(value) == 2):
      raise ValueError(f'config.pbt_init_ranges.{name} must be a pair (low, high), got {value!r}.')
    low, high = value
    if not 0 < low <= high:
      raise ValueError(f'config.pbt_init_ranges.{name} must satisfy 0 < low <= high, got {value!r}.')
  config_checks.validate_distributed(member_config(config, 0))


def base_hyperparams(config) -> dict:
  learner = LearnerConfig.from_dict(config.learner.to_dict())
  return {name: float(getattr(learner, name))
          for name in ('learning_rate', 'entropy_cost', 'rmsprop_epsilon', 'grad_clip')}


# ------------------------------------------------------------------ program
def report_episodes(game: str, learner_client, should_stop, returns) -> dict:
  """A PBT actor's finished-episode hook (`Actor(on_episodes=...)`).

  Sends the returns to the member's learner (its fitness) and gives the per-game
  fields of the actor's metrics record.
  """
  returns = [float(r) for r in returns]
  if not should_stop():
    try:  # fire and forget: never block the actor (a lost report only shrinks the window)
      learner_client.futures.report_episodes(game, returns)
    except Exception:  # pylint: disable=broad-except
      pass
  return dict(game_return_mean=float(np.mean(returns)),
              game_hns_mean=float(np.mean([human_scores.human_normalized_score(game, r)
                                           for r in returns])))


def make_pbt_program(config, workdir: str):
  """Builds (does not launch) the PBT program for `config`, writing into `workdir`."""
  return build_pbt_program(config, workdir)[0]


def build_pbt_program(config, workdir: str):
  """(program, [learner handle per member]); tests add probe nodes with the handles."""
  # Launchpad (and launch.program, which imports it) read LAUNCHPAD_LOGGING_DIR at import:
  # main() sets it first, so they are imported in the functions that run after it.
  import launchpad as lp  # pylint: disable=g-import-not-at-top
  from launch import program as single  # pylint: disable=g-import-not-at-top

  validate_pbt_config(config)
  workdir = os.path.abspath(workdir)
  config = config.copy_and_resolve_references()
  pbt = pbt_config(config)
  games = games_of(config)
  members = [member_config(config, m) for m in range(pbt.population_size)]
  num_actions, observation_shape = factory.env_spec(members[0].env)
  actor_games = (levels.assign_games(config.num_actors, games) if games
                 else [config.env.game] * config.num_actors)
  base_hp = base_hyperparams(config)
  init_ranges = {k: tuple(v) for k, v in config.pbt_init_ranges.items()}

  network_fn = functools.partial(single.build_network, config, num_actions, observation_shape)
  build_replay_tables = functools.partial(single.build_replay_tables, config, network_fn)

  def build_learner(m, replay_client):
    from s3ta.pbt.learner import PBTLearner  # pylint: disable=g-import-not-at-top  (in the node only)
    # No stop_program: the controller stops the program once every member is done.
    return single.build_learner(members[m], member_dir(workdir, m), network_fn, replay_client,
                                learner_cls=PBTLearner, name=f'member {m} learner',
                                fitness_window=config.fitness_window)

  def build_actor(m, actor_id, replay_client, learner_client, *, stop_event, attempt):
    # Runs in the supervised worker process (launch/supervision.py): `stop_event` is its own.
    game = actor_games[actor_id]
    env_config = copy.deepcopy(members[m].env)
    env_config.game = game
    on_episodes = functools.partial(report_episodes, game, learner_client, stop_event.is_set)
    return single.build_actor(members[m], member_dir(workdir, m), network_fn, actor_id, replay_client,
                              learner_client, env_config=env_config,
                              label=f'actor_{actor_id}_{game}', on_episodes=on_episodes,
                              stop_event=stop_event, attempt=attempt)

  def build_supervised_actor(m, actor_id, replay_client, learner_client):
    return single.build_supervisor(members[m], member_dir(workdir, m),
                                   f'actor_{actor_id}_{actor_games[actor_id]}', build_actor, m,
                                   actor_id, replay_client, learner_client)

  def build_controller(learner_clients):
    from s3ta.pbt.node import ControllerNode  # pylint: disable=g-import-not-at-top  (in the node only)
    return ControllerNode(pbt.to_dict(), learner_clients, workdir, base_hp, init_ranges,
                          max_seconds=config.pbt_max_seconds)

  program = lp.Program('s3ta_pbt')
  learners = []
  for m in range(pbt.population_size):
    with program.group('replay'):
      replay = program.add_node(lp.ReverbNode(
          build_replay_tables, checkpoint_ctor=functools.partial(
              single.build_replay_checkpointer, os.path.join(member_dir(workdir, m), 'reverb'))))
    with program.group('learner'):
      learner = program.add_node(lp.CourierNode(build_learner, m, replay))
    # Trap 2: courier clients otherwise wait for a dead learner forever.
    learner.set_client_kwargs(call_timeout=float(config.param_timeout_s))
    learners.append(learner)
    with program.group('actor'):
      for actor_id in range(config.num_actors):
        program.add_node(lp.PyClassNode(build_supervised_actor, m, actor_id, replay, learner))
  with program.group('pbt_controller'):
    program.add_node(lp.PyClassNode(build_controller, learners))
  return program, learners


def local_resources(config) -> dict:
  # As in build_pbt_program: Launchpad only after main() has set its logging directory.
  from launch import program as single  # pylint: disable=g-import-not-at-top
  from launchpad.nodes.python.local_multi_processing import PythonProcess  # pylint: disable=g-import-not-at-top
  resources = single.local_resources(config)
  resources.pop('evaluator', None)
  resources['pbt_controller'] = PythonProcess(env=dict(single.CPU_NODE_ENV))
  return resources


# ------------------------------------------------------------------ CLI
def main(argv) -> int:
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  config, workdir = _CONFIG.value, _WORKDIR.value
  if config is None or not workdir:
    print('error: --config and --workdir are required.', file=sys.stderr)
    return 2
  try:
    validate_pbt_config(config)
  except ValueError as e:
    print(f'error: invalid config: {e}', file=sys.stderr)
    return 2
  try:
    cli.require_local_workdir(workdir, 'launch.pbt')
    workdir = os.path.abspath(workdir)
    cli.check_writable(workdir)
    for m in range(pbt_config(config).population_size):  # each member resumes its own checkpoints
      cli.check_workdir(member_dir(workdir, m), config.network.to_dict())
  except ValueError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  if isolation.NETWORK.value == 'isolated':  # servers reachable from loopback only
    isolation.isolate('launch.pbt', sys.argv[1:])
  os.makedirs(workdir, exist_ok=True)
  # Traps 5 and 6: Launchpad logs and job files go into the workdir, not /tmp.
  os.environ.setdefault('LAUNCHPAD_LOGGING_DIR', os.path.join(workdir, 'logs'))
  tmp = os.path.join(workdir, 'tmp')
  os.makedirs(tmp, exist_ok=True)
  tempfile.tempdir = tmp
  import launchpad as lp  # pylint: disable=g-import-not-at-top  (after LAUNCHPAD_LOGGING_DIR is set)
  start = time.time()
  program = make_pbt_program(config, workdir)
  print(f'[pbt] launching {config.population_size} members x ({config.num_actors} actors + learner + '
        f'replay) + controller; logs in {os.environ["LAUNCHPAD_LOGGING_DIR"]}', flush=True)
  manager = lp.launch(program, launch_type=_LAUNCH_TYPE.value, terminal='output_to_files',
                      local_resources=local_resources(config))
  if hasattr(manager, 'wait'):
    manager.wait()
  print(f'[pbt] done in {time.time() - start:.0f} s; summary: python -m s3ta.pbt.report --workdir={workdir}',
        flush=True)
  return 0


if __name__ == '__main__':
  flags.mark_flags_as_required(['config', 'workdir'])
  app.run(lambda argv: sys.exit(main(argv)), flags_parser=cli.parse_flags)
