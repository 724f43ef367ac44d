"""Evolves paper 004's AttentionAgent with CMA-ES: a controller and N rollout workers.

  python -m launch.evolve --config=experiments/attention_agent.py:take_cover --workdir=DIR
  python -m launch.evolve --config=experiments/attention_agent.py:car_racing --workdir=DIR \
      --launch_type=local_mp --config.num_workers=14

--launch_type=single (default): this process is the controller and the workers are
child processes (a dead one is restarted). --launch_type=local_mp: a Launchpad program,
one `controller` node and `num_workers` courier `worker` nodes (a dead one is counted,
its units go to the others); local runs are kept off the network (launch/isolation.py).
Both write the same workdir (s3ta/evolution/controller.py) and resume from its latest
checkpoint. Exit status: 0 done, 1 every worker died, 2 bad flag/config/workdir,
130 Ctrl-C, 143 SIGTERM (both save a checkpoint of the last complete generation first; a
second signal stops at once without one).
"""

if __name__ == '__main__':  # first: re-executing now costs only the interpreter's start
  from launch import host_tuning  # pylint: disable=g-import-not-at-top
  host_tuning.reexec_with_host_tuning()  # glibc huge pages for XLA:CPU's buffers (host_tuning.py)

import json
import logging
import os
import sys
import tempfile
import threading

from absl import app
from absl import flags
from ml_collections import config_flags

from launch import cli
from launch import isolation

LAUNCH_TYPES = ('single', 'local_mp')
CPU_ONLY = {'JAX_PLATFORMS': 'cpu', 'CUDA_VISIBLE_DEVICES': '', 'TF_CPP_MIN_LOG_LEVEL': '2'}

_CONFIG = config_flags.DEFINE_config_file(
    'config', None, 'Evolution config, e.g. experiments/attention_agent.py:take_cover.')
_WORKDIR = flags.DEFINE_string('workdir', None, 'Directory for checkpoints, metrics, logs.')
_LAUNCH_TYPE = flags.DEFINE_enum('launch_type', 'single', LAUNCH_TYPES,
                                 'single: workers are child processes; local_mp: Launchpad nodes.')


def _print(line: str) -> None:
  print(line, flush=True)


def run_single(config, workdir: str) -> int:
  """Controller here, `num_workers` local worker processes."""
  from s3ta.evolution import controller as controller_lib  # pylint: disable=g-import-not-at-top  (JAX after flag checks)
  from s3ta.evolution import dispatch  # pylint: disable=g-import-not-at-top
  os.environ.update(CPU_ONLY)  # inherited by the spawned workers
  stop = threading.Event()
  received = cli.stop_on_signals(stop)
  clients = [dispatch.LocalWorkerClient(config.to_dict(), f'worker_{i}')
             for i in range(config.num_workers)]
  try:
    dispatcher = dispatch.Dispatcher(clients, unit_timeout_s=config.unit_timeout_s, log=_print)
    try:
      controller = controller_lib.Controller(config, workdir, dispatcher, log=_print)
    except ValueError as e:  # a checkpoint this config cannot resume (agent size, strategy)
      return _error(str(e))
    summary = controller.run(should_stop=stop.is_set)
  except KeyboardInterrupt:
    _print('[evolve] interrupted twice: stopped without a final checkpoint.')
    return cli.SIGNAL_EXIT_CODES[received[0]]
  finally:
    for client in clients:
      client.close(kill=bool(received))
  if received:
    return cli.SIGNAL_EXIT_CODES[received[0]]
  return 1 if summary.stop_reason.startswith('no workers') else 0


# ------------------------------------------------------------------ Launchpad program
def _controller_node(config, workdir: str, *worker_clients) -> None:
  """The controller node; Launchpad passes the worker nodes' courier clients."""
  import launchpad as lp  # pylint: disable=g-import-not-at-top  (node process)
  from s3ta.evolution import controller as controller_lib  # pylint: disable=g-import-not-at-top
  from s3ta.evolution import dispatch  # pylint: disable=g-import-not-at-top
  stop = lp.stop_event()  # set when the program stops (Launchpad handles the signals)
  clients = [dispatch.CourierWorkerClient(client, f'worker_{i}')
             for i, client in enumerate(worker_clients)]
  try:
    dispatcher = dispatch.Dispatcher(clients, unit_timeout_s=config.unit_timeout_s, log=_print)
    controller_lib.Controller(config, workdir, dispatcher, log=_print).run(should_stop=stop.is_set)
  finally:
    lp.stop()


def make_program(config, workdir: str):
  import launchpad as lp  # pylint: disable=g-import-not-at-top  (after LAUNCHPAD_LOGGING_DIR is set)
  from s3ta.evolution.worker import RolloutWorker  # pylint: disable=g-import-not-at-top
  program = lp.Program('s3ta_evolve')
  with program.group('worker'):
    workers = [program.add_node(lp.CourierNode(RolloutWorker, config))
               for _ in range(config.num_workers)]
  with program.group('controller'):
    program.add_node(lp.PyNode(_controller_node, config, workdir, *workers))
  return program


def run_local_mp(config, workdir: str) -> int:
  if isolation.NETWORK.value == 'isolated':  # courier unpickles: loopback only
    isolation.isolate('launch.evolve', sys.argv[1:])
  os.environ.setdefault('LAUNCHPAD_LOGGING_DIR', os.path.join(workdir, 'logs'))
  tmp = os.path.join(workdir, 'tmp')
  os.makedirs(tmp, exist_ok=True)
  tempfile.tempdir = tmp
  import launchpad as lp  # pylint: disable=g-import-not-at-top
  from launchpad.nodes.python.local_multi_processing import PythonProcess  # pylint: disable=g-import-not-at-top
  resources = {group: PythonProcess(env=dict(CPU_ONLY)) for group in ('worker', 'controller')}
  _print(f'[evolve] launching a controller and {config.num_workers} workers; node logs in '
         f'{os.environ["LAUNCHPAD_LOGGING_DIR"]}')
  summary_path = os.path.join(workdir, 'summary.json')
  before = os.path.getmtime(summary_path) if os.path.exists(summary_path) else None
  manager = lp.launch(make_program(config, workdir), launch_type='local_mp',
                      terminal='output_to_files', local_resources=resources)
  manager.wait()
  if not os.path.exists(summary_path) or os.path.getmtime(summary_path) == before:
    _print('[evolve] the controller ended without a summary; see its log in '
           f'{os.environ["LAUNCHPAD_LOGGING_DIR"]}.')
    return 1
  with open(summary_path) as f:
    summary = json.load(f)
  _print(f'[evolve] summary: {json.dumps(summary)}')
  return 1 if summary['stop_reason'].startswith('no workers') else 0


def main(argv) -> int:
  if len(argv) > 1:
    return _error(f'unexpected arguments {argv[1:]}.')
  config, workdir = _CONFIG.value, _WORKDIR.value
  if config is None:
    return _error('--config is required, e.g. --config=experiments/attention_agent.py:take_cover.')
  if not workdir:
    return _error('--workdir is required.')
  from s3ta.evolution import controller as controller_lib  # pylint: disable=g-import-not-at-top  (JAX only after the flags parse)
  try:
    controller_lib.validate_config(config)
    cli.require_local_workdir(workdir, 'launch.evolve')
  except ValueError as e:
    return _error(f'invalid config: {e}' if 'workdir' not in str(e) else str(e))
  workdir = os.path.abspath(workdir)
  logging.getLogger('jax._src.xla_bridge').setLevel(logging.WARNING)  # no 'rocm'/'tpu' INFO lines
  try:
    cli.check_writable(workdir)
  except ValueError as e:
    return _error(str(e))
  if _LAUNCH_TYPE.value == 'single':
    return run_single(config, workdir)
  return run_local_mp(config, workdir)


def _error(message: str) -> int:
  print(f'error: {message}', file=sys.stderr, flush=True)
  return 2


if __name__ == '__main__':
  flags.mark_flags_as_required(['config', 'workdir'])
  app.run(lambda argv: sys.exit(main(argv)), flags_parser=cli.parse_flags)
