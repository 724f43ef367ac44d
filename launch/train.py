"""Launches distributed S3TA/IMPALA training from the command line.

  python -m launch.train --config=experiments/smoke.py --workdir=/tmp/s3ta_smoke
  python -m launch.train --config=experiments/atari_expert.py --workdir=gs://BUCKET/run \
      --launch_type=vertex_ai [--dry_run]

A local run (`local_mp`: every node its own process, in a loopback-only network
namespace, launch/isolation.py) validates the config and workdir first (one error
line, exit 2), prints a progress line every `--progress_period_s` and a summary at
exit; exit 0 when the learner reached its stop condition, 1 when a node failed, 130
on Ctrl-C, 143 on SIGTERM. A Vertex AI run (launch/cluster.py) needs a remote
workdir; `--dry_run` prints the job instead of submitting it. Workdir layout and
flags: launch/README.md.
"""

if __name__ == '__main__':  # first: re-executing now costs only the interpreter's start
  from launch import host_tuning  # pylint: disable=g-import-not-at-top
  host_tuning.reexec_with_host_tuning()  # glibc huge pages for XLA:CPU's buffers (host_tuning.py)

import math
import os
import signal
import sys
import tempfile
import threading
import time
from typing import Optional

import s3ta  # noqa: F401  pylint: disable=unused-import  (rlax before TF)

from absl import app, flags  # pylint: disable=g-import-not-at-top
from ml_collections import config_flags  # pylint: disable=g-import-not-at-top
import psutil  # pylint: disable=g-import-not-at-top

from launch import cli  # pylint: disable=g-import-not-at-top
from launch import cluster  # pylint: disable=g-import-not-at-top
from launch import config_checks  # pylint: disable=g-import-not-at-top
from launch import isolation  # pylint: disable=g-import-not-at-top  (defines --network)
from launch import monitor as monitor_lib  # pylint: disable=g-import-not-at-top
from s3ta.utils import checkpoint as checkpoint_lib  # pylint: disable=g-import-not-at-top
from s3ta.utils.metrics import ProgressPrinter  # pylint: disable=g-import-not-at-top

# Launchpad and launch.program (which imports it) are imported inside the run functions:
# Launchpad reads LAUNCHPAD_LOGGING_DIR at import, and _prepare_workdir sets it.

_CONFIG = config_flags.DEFINE_config_file(
    'config', None, 'Experiment config file, e.g. experiments/smoke.py[:arg].')
_WORKDIR = flags.DEFINE_string('workdir', None, 'Directory for checkpoints, metrics and logs.')
_LAUNCH_TYPE = flags.DEFINE_enum('launch_type', 'local_mp', ['local_mp', 'vertex_ai'],
                                 'local_mp: every node a local process; vertex_ai: cluster.')
_DRY_RUN = flags.DEFINE_bool(
    'dry_run', False, 'vertex_ai: build the whole job (images, per-node resources, command '
    'lines) and print it without submitting.')
_TERMINAL = flags.DEFINE_enum(
    'terminal', 'output_to_files', ['output_to_files', 'current_terminal'],
    "local_mp: where node output goes ('output_to_files' into <workdir>/logs, or "
    "'current_terminal').")
_PROGRESS_S = flags.DEFINE_float('progress_period_s', 10.0, 'Seconds between progress lines.')
_STARTUP_GRACE_S = flags.DEFINE_float(
    'startup_grace_s', 180.0,
    'The launcher stops the program if it runs this long past config.max_seconds.')

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _prepare_workdir(workdir: str) -> dict:
  """Creates the workdir layout and points every tmp/log location into it (traps 5, 6)."""
  paths = {name: os.path.join(workdir, name) for name in ('logs', 'tmp', 'checkpoints')}
  for path in paths.values():
    os.makedirs(path, exist_ok=True)
  os.environ['LAUNCHPAD_LOGGING_DIR'] = paths['logs']  # read when launchpad is imported
  os.environ['TMPDIR'] = paths['tmp']  # inherited by nodes (Reverb, TF, JAX temp files)
  tempfile.tempdir = paths['tmp']  # Launchpad's job.pkl dirs (mkdtemp in this process)
  python_path = os.environ.get('PYTHONPATH', '')
  if REPO_ROOT not in python_path.split(os.pathsep):
    os.environ['PYTHONPATH'] = os.pathsep.join(p for p in (REPO_ROOT, python_path) if p)
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  return paths


def _leftover_processes(root_pid: int, workdir: str) -> list:
  """This run's node processes still alive: our descendants, and Launchpad nodes whose job file
  lies in `<workdir>/tmp` (orphans). Other processes that name the workdir (a `tail -f` of its
  log, TensorBoard, a soak benchmark) are left alone."""
  job_files = os.path.join(os.path.abspath(workdir), 'tmp') + os.sep
  found = {}
  ancestors = {p.pid for p in psutil.Process(root_pid).parents()} | {root_pid}
  try:
    for p in psutil.Process(root_pid).children(recursive=True):
      found[p.pid] = p
  except psutil.NoSuchProcess:
    pass
  for p in psutil.process_iter(['pid', 'cmdline']):
    try:
      cmdline = p.info['cmdline'] or []
      is_node = (any('launchpad' in arg for arg in cmdline)
                 and any(arg.startswith(job_files) for arg in cmdline))
      if p.pid not in ancestors and is_node:
        found[p.pid] = p
    except (psutil.NoSuchProcess, psutil.AccessDenied):
      pass
  return list(found.values())


def run_local(config, workdir: str) -> int:
  """Launches with local_mp, prints progress, waits, prints the summary; returns the exit code."""
  import launchpad as lp  # pylint: disable=g-import-not-at-top
  from launch import program as program_lib  # pylint: disable=g-import-not-at-top

  start = time.time()
  mode = program_lib.inference_mode(config)
  monitor = monitor_lib.RunMonitor(workdir, config.queue_size, inference_mode=mode)
  program = program_lib.make_program(config, workdir)
  print(_launch_line(config, mode, workdir), flush=True)
  manager = lp.launch(program, launch_type='local_mp',
                      local_resources=program_lib.local_resources(config),
                      terminal=_TERMINAL.value)
  failure = []
  interrupted = []

  def wait():
    try:
      manager.wait()
    except BaseException as e:  # pylint: disable=broad-except
      # A node failed; the manager is stopping the others: let them finish (the
      # learner saves a checkpoint) — it SIGKILLs whatever outlives its notice period.
      failure.append(e)
      manager.wait(raise_error=False)

  waiter = threading.Thread(target=wait, daemon=True)
  waiter.start()
  previous_sigint = signal.getsignal(signal.SIGINT)

  def on_sigint(sig, frame):
    interrupted.append(True)
    if callable(previous_sigint):
      previous_sigint(sig, frame)

  signal.signal(signal.SIGINT, on_sigint)
  previous_sigterm = signal.getsignal(signal.SIGTERM)
  guard_sent = False
  terminated = []

  def on_sigterm(sig, frame):  # from outside, or the max_seconds guard below
    if not guard_sent:
      terminated.append(True)
    if callable(previous_sigterm):
      previous_sigterm(sig, frame)

  signal.signal(signal.SIGTERM, on_sigterm)
  printer = ProgressPrinter(_PROGRESS_S.value)
  while waiter.is_alive():
    waiter.join(0.5)
    monitor.poll()
    printer.update(**monitor.progress_kwargs())
    limit = config.max_seconds + _STARTUP_GRACE_S.value if config.max_seconds else 0
    if limit and not guard_sent and time.time() - start > limit:
      print('[launch] the program ran past max_seconds + grace: stopping it.', flush=True)
      guard_sent = True  # before the signal: on_sigterm must not count it as an outside SIGTERM
      os.kill(os.getpid(), signal.SIGTERM)  # the worker manager stops every node
  monitor.poll()
  wall = time.time() - start
  checkpoint = checkpoint_lib.latest_checkpoint(checkpoint_lib.checkpoint_dir(workdir))
  print(monitor_lib.format_summary(monitor, wall, checkpoint), flush=True)

  _kill_leftovers(workdir)
  return _exit_code(workdir, monitor, interrupted=bool(interrupted), terminated=bool(terminated),
                    failure=failure[0] if failure else None)


def _launch_line(config, mode: str, workdir: str) -> str:
  """What is launched, where inference runs and why, and where the node logs go."""
  how = ('in the actors' if mode == 'actor' else 'central in the learner process'
         if config.inference.colocated else f'central on {config.inference.num_nodes} node(s)')
  if config.inference.mode == 'auto':
    how += (' (auto: the learner host has an accelerator)' if mode == 'central' else
            ' (auto: no accelerator)')
  env = config.env.get('game', config.env.name)  # an Atari game, or 'catch', 'tmaze'
  return (f'[launch] {config.num_actors} actors x {config.env.num_envs} {env} envs, '
          f'unroll {config.unroll_length}, batch {config.batch_size}, queue {config.queue_size}; '
          f'inference {how}; node logs in {os.path.join(workdir, "logs")}')


def _kill_leftovers(workdir: str) -> None:
  leftovers = _leftover_processes(os.getpid(), workdir)
  for p in leftovers:  # only our own children / this run's nodes
    try:
      p.kill()
    except Exception:  # pylint: disable=broad-except
      pass
  if leftovers:
    print(f'[launch] killed {len(leftovers)} leftover process(es).', flush=True)


def _exit_code(workdir: str, monitor, *, interrupted: bool, terminated: bool,
               failure: Optional[BaseException]) -> int:
  """130 after Ctrl-C, 143 after an outside SIGTERM, 1 when a node failed or the learner did not
  finish cleanly, else 0; with one line saying which."""
  logs = os.path.join(workdir, 'logs')
  if interrupted:
    print('[launch] interrupted by the user.', flush=True)
    return 130
  if terminated and monitor.stop_reason() in (None, 'stop requested'):
    # (Launchpad also signals the launcher when the learner ends the program itself.)
    print('[launch] terminated (SIGTERM); every node stopped, the learner saved first.', flush=True)
    return 143
  if failure is not None:
    print(f'[launch] a node failed: {failure}; see {logs}.', file=sys.stderr, flush=True)
    return 1
  if monitor.final_learner_record() is None:
    print(f'[launch] the learner did not finish cleanly; see its log in {logs}.',
          file=sys.stderr, flush=True)
    return 1
  if monitor.stop_reason() == 'non-finite':
    print(f'[launch] the learner halted on non-finite updates; see its log in {logs}.',
          file=sys.stderr, flush=True)
    return 1
  return 0


def run_vertex_ai(config, workdir: str, dry_run: bool) -> int:
  """Submits the program to Vertex AI, or (dry run) prints the job it would submit."""
  from launch import program as program_lib  # pylint: disable=g-import-not-at-top  (see above)
  try:
    cluster.check_workdir(workdir)
    if not dry_run:  # a dry run writes nothing, not even a probe file
      cli.check_workdir(workdir, config.network.to_dict())
  except ValueError as e:
    cli.exit_error(str(e))
  code = cluster.stage_code(REPO_ROOT, cluster.staging_directory())
  try:
    resources = program_lib.xm_resources(config, code, os.path.join(code, 'requirements.txt'),
                                         os.path.join(code, 'requirements-gpu.txt'))
  except (ImportError, ValueError) as e:
    cli.exit_error(str(e))
  program = program_lib.make_program(config, workdir, local=False)
  description = cluster.launch(program, resources, dry_run=dry_run)
  if description:
    print(description, flush=True)
  return 0


def main(argv):
  if len(argv) > 1:
    cli.exit_error(f'unexpected arguments {argv[1:]}.')
  config = _CONFIG.value
  if config is None:
    cli.exit_error('--config is required, e.g. --config=experiments/smoke.py.')
  if not _WORKDIR.value:
    cli.exit_error('--workdir is required.')
  for flag in (_PROGRESS_S, _STARTUP_GRACE_S):
    if not (math.isfinite(flag.value) and flag.value > 0):
      cli.exit_error(f'--{flag.name} must be a number of seconds > 0, got {flag.value!r}.')
  try:
    config_checks.validate_distributed(config)
  except ValueError as e:
    cli.exit_error(f'invalid config: {e}')
  if _LAUNCH_TYPE.value == 'vertex_ai':
    sys.exit(run_vertex_ai(config, _WORKDIR.value, _DRY_RUN.value))
  if _DRY_RUN.value:
    cli.exit_error('--dry_run applies to --launch_type=vertex_ai only.')
  try:
    cli.require_local_workdir(_WORKDIR.value, 'launch.train --launch_type=local_mp')
    workdir = os.path.abspath(_WORKDIR.value)
    cli.check_workdir(workdir, config.network.to_dict())
  except ValueError as e:
    cli.exit_error(str(e))
  if isolation.NETWORK.value == 'isolated':
    isolation.isolate('launch.train', sys.argv[1:])
  _prepare_workdir(workdir)
  sys.exit(run_local(config, workdir))


if __name__ == '__main__':
  app.run(main, flags_parser=cli.parse_flags)
