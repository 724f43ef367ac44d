"""Actors and evaluators survive their own death: each node supervises a worker child process.

Under Launchpad's `local_mp` any node process that dies takes the whole program down
("Killing entire runtime"). A `Supervisor` is the body of an actor or evaluator node:
it runs the real worker (EnvPool, policy, Reverb writer) in a child process started
with `python -m launch.supervision PAYLOAD ATTEMPT` and, when the child dies with a
non-zero status (a crash, an OOM kill, a SIGKILL), starts a fresh one after an
exponential backoff, up to `max_restarts` times. Attempt n > 0 builds its worker with
its own PRNG stream and env seeds (the builders fold `attempt` in) and fetches the
learner's current parameters as any actor does. When the budget is spent the node
stays down, the run goes on degraded and says so. A program stop reaches the child as
SIGTERM (its `stop` event; a child still building exits at once); it is killed if it
outlives `grace_s`, which is shorter than Launchpad's 10 s termination notice.

Launchpad's own `MultiProcessingColocation(num_retries_on_failure=...)` restarts
children too, but without backoff, metrics or a degraded mode, it re-raises when its
budget is spent (ending the run), and it finds the interpreter through `$_`.

Every state change is a `supervisor.<name>` record in `<workdir>/metrics.jsonl`
(`alive`, `restarts`, `degraded`, `exit_code`, `worker_pid`); `launch.monitor` turns them
into the progress line's "actors 3/4 alive, 2 restarts".
"""

import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Callable, Optional

import cloudpickle  # Launchpad's own pickler (closures, partials with clients)

SUPERVISOR_PREFIX = 'supervisor.'


def restart_delay(restart: int, backoff_s: float, max_backoff_s: float) -> float:
  """Seconds before restart number `restart` (1, 2, ...): backoff_s, 2 backoff_s, ... capped."""
  return min(backoff_s * 2.0 ** (restart - 1), max_backoff_s)


def describe_exit(code: int) -> str:
  """'exit status 1' or 'killed by SIGKILL' for a Popen return code."""
  if code < 0:
    try:
      return f'killed by {signal.Signals(-code).name}'
    except ValueError:
      return f'killed by signal {-code}'
  return f'exit status {code}'


class Supervisor:
  """Runs `worker_fn(stop_event=..., attempt=...).run()` in a child process, restarting it.

  `worker_fn` must be picklable by cloudpickle (e.g. a `functools.partial` of a
  module-level builder with Reverb/courier clients bound: both pickle as addresses).
  """

  def __init__(self, name: str, worker_fn: Callable, *, max_restarts: int, backoff_s: float,
               max_backoff_s: float = 60.0, grace_s: float = 8.0,
               stop_event: Optional[threading.Event] = None,
               logger: Optional[Callable[[dict], None]] = None):
    if max_restarts < 0:
      raise ValueError(f'max_restarts must be >= 0, got {max_restarts!r}.')
    if backoff_s < 0:
      raise ValueError(f'backoff_s must be >= 0, got {backoff_s!r}.')
    self._name = name
    self._worker_fn = worker_fn
    self._max_restarts = max_restarts
    self._backoff_s = backoff_s
    self._max_backoff_s = max_backoff_s
    self._grace_s = grace_s
    self._stop = stop_event
    self._logger = logger or (lambda record: None)
    self.restarts = 0

  def _say(self, message: str) -> None:
    print(f'[{self._name}] {message}', flush=True)

  def _log(self, **record) -> None:
    self._logger(dict(record, restarts=self.restarts))

  def run(self) -> None:
    stop = self._stop
    if stop is None:
      import launchpad as lp  # pylint: disable=g-import-not-at-top  (only inside a node)
      stop = lp.stop_event()
    fd, payload = tempfile.mkstemp(prefix=f'{self._name}_', suffix='.pkl')
    with os.fdopen(fd, 'wb') as f:
      cloudpickle.dump(self._worker_fn, f)
    try:
      self._supervise(stop, payload)
    finally:
      os.remove(payload)

  def _supervise(self, stop: threading.Event, payload: str) -> None:
    while not stop.is_set():  # attempt n of the worker is restart n (0: the first)
      child = subprocess.Popen([sys.executable, '-m', 'launch.supervision', payload,
                                str(self.restarts)])
      self._log(alive=1, worker_pid=child.pid)
      while child.poll() is None and not stop.wait(0.5):
        pass
      if child.poll() is None:  # the program is stopping
        self._stop_child(child)
        self._log(alive=0, exit_code=child.returncode)
        return
      code = child.returncode
      if code == 0:
        self._log(alive=0, exit_code=0)
        return
      if self.restarts >= self._max_restarts:
        self._say(f'worker {describe_exit(code)}; restart budget ({self._max_restarts}) spent: '
                  'this node stays down and the run continues degraded.')
        self._log(alive=0, exit_code=code, degraded=1)
        stop.wait()
        return
      self.restarts += 1
      delay = restart_delay(self.restarts, self._backoff_s, self._max_backoff_s)
      self._say(f'worker {describe_exit(code)}; restart {self.restarts}/{self._max_restarts} '
                f'in {delay:.1f} s.')
      self._log(alive=0, exit_code=code)
      if stop.wait(delay):
        return

  def _stop_child(self, child: subprocess.Popen) -> None:
    child.send_signal(signal.SIGTERM)
    try:
      child.wait(self._grace_s)
    except subprocess.TimeoutExpired:
      self._say(f'worker did not stop within {self._grace_s:.0f} s: killing it.')
      child.kill()
      child.wait()


def _die_with_parent() -> None:
  """Linux: SIGTERM this process when its supervisor dies (no orphaned workers)."""
  try:
    ctypes.CDLL('libc.so.6', use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
  except (OSError, AttributeError):
    pass


def worker_main(payload: str, attempt: int) -> None:
  """The child: build the worker from the pickled builder and run it until SIGTERM.

  Unpickling imports what the builder needs; `launch.program`'s builders import `s3ta`
  (rlax before TF/Reverb) before any Reverb client is rebuilt.
  """
  _die_with_parent()
  stop = threading.Event()

  def on_stop(*_):
    if not running:  # still importing / building (seconds): nothing to finish, leave now
      os._exit(0)  # pylint: disable=protected-access
    stop.set()

  running = False
  for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, on_stop)
  with open(payload, 'rb') as f:
    worker_fn = cloudpickle.load(f)
  worker = worker_fn(stop_event=stop, attempt=attempt)
  running = True
  worker.run()


if __name__ == '__main__':
  worker_main(sys.argv[1], int(sys.argv[2]))
