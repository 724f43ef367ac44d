"""Spreads scoring units over rollout workers, re-queuing the units of a worker that dies.

A unit is (vectors [k, P], seeds [k, r]); a worker returns (returns [k, r], steps). Each
idle live worker gets the next unit; when a call fails (the process died, its
connection broke) or outlives `unit_timeout_s`, the worker is counted dead, its unit goes
back to the queue for the others, and a worker that can be restarted (local processes)
is restarted. Only when no worker is left does scoring fail.

Workers are `WorkerClient`s: `LocalWorkerClient` (a child process of this one, the
single-machine mode) or `CourierWorkerClient` (a Launchpad courier node).
"""

import concurrent.futures as futures
import multiprocessing
import os
import signal
import time
from typing import Any, Callable, Optional, Protocol, Sequence

import numpy as np

from s3ta.acting.policy import decode_arrays, encode_arrays


class NoWorkersLeft(RuntimeError):
  """Every worker died; the generation cannot be scored."""


class WorkerClient(Protocol):
  name: str

  def submit(self, vectors: np.ndarray, seeds: np.ndarray) -> futures.Future:
    ...

  def alive(self) -> bool:
    """False once the worker is known to be dead (its unit is then re-queued)."""

  def restart(self) -> bool:
    """Replaces a dead worker; False if this kind cannot be restarted."""


# ------------------------------------------------------------------ local processes
_WORKER = None  # the RolloutWorker of a local worker process


def _start_worker(config_dict: dict) -> None:
  global _WORKER
  os.setpgrp()  # its own process group, so that its VizDoom children can be ended with it
  import ml_collections  # pylint: disable=g-import-not-at-top  (child process)
  from s3ta.evolution.worker import RolloutWorker  # pylint: disable=g-import-not-at-top
  _WORKER = RolloutWorker(ml_collections.ConfigDict(config_dict))


def _score(vectors, seeds):
  return _WORKER.score(vectors, seeds)


def _pid():
  return _WORKER.pid()


class LocalWorkerClient:
  """A RolloutWorker in its own child process (spawned: no JAX state is forked).

  Death is detected by polling the process: VizDoom's engine processes inherit the
  pool's pipes, so the executor alone would never see its worker die. The worker leads
  its own process group, which is killed whole on restart and close.
  """

  def __init__(self, config_dict: dict, name: str):
    self.name = name
    self._config_dict = config_dict
    self._pool = self._new_pool()

  def _new_pool(self) -> futures.ProcessPoolExecutor:
    return futures.ProcessPoolExecutor(
        max_workers=1, mp_context=multiprocessing.get_context('spawn'),
        initializer=_start_worker, initargs=(self._config_dict,))

  def _processes(self) -> list:
    return list((self._pool._processes or {}).values())  # pylint: disable=protected-access  (no public handle)

  def submit(self, vectors, seeds) -> futures.Future:
    return self._pool.submit(_score, vectors, seeds)

  def pid(self) -> int:
    return self._pool.submit(_pid).result()

  def alive(self) -> bool:
    return all(process.is_alive() for process in self._processes())

  def _kill_groups(self, processes: Optional[list] = None) -> None:
    for process in self._processes() if processes is None else processes:
      try:
        os.killpg(process.pid, signal.SIGKILL)
      except (ProcessLookupError, PermissionError):
        pass

  def restart(self) -> bool:
    self._kill_groups()
    self._pool.shutdown(wait=False, cancel_futures=True)
    self._pool = self._new_pool()
    return True

  def close(self, kill: bool = False) -> None:
    """Ends the worker and its VizDoom processes: after its current unit, or at once with `kill`."""
    processes = self._processes()
    if kill:
      self._kill_groups(processes)
    self._pool.shutdown(wait=not kill, cancel_futures=True)
    self._kill_groups(processes)  # the group outlives its leader while VizDoom runs


class CourierWorkerClient:
  """A Launchpad courier node running RolloutWorker (launch/evolve.py).

  Arrays cross as (dtype, shape, bytes) triples (`encode_arrays`): a courier call with
  NumPy arguments never reached the server in our pinned stack. Calls run on a thread
  of this client, so `submit` returns at once.
  """

  def __init__(self, client: Any, name: str):
    self.name = name
    self._client = client
    self._thread = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

  def _call(self, vectors, seeds) -> tuple:
    reply = decode_arrays(self._client.score_encoded(encode_arrays(
        {'vectors': np.asarray(vectors, np.float32), 'seeds': np.asarray(seeds, np.int64)})))
    return reply['returns'], int(reply['steps'])

  def submit(self, vectors, seeds) -> futures.Future:
    return self._thread.submit(self._call, vectors, seeds)

  def alive(self) -> bool:
    return True  # a dead node shows as a failed call

  def restart(self) -> bool:
    return False  # Launchpad does not restart a courier node


# ------------------------------------------------------------------ dispatching
class Dispatcher:
  """Runs units on workers; counts and survives worker deaths (module docstring)."""

  def __init__(self, clients: Sequence[WorkerClient], *, unit_timeout_s: float = 3600.0,
               log: Callable[[str], None] = print):
    if not clients:
      raise ValueError('at least one worker is needed.')
    self._live = list(clients)
    self.deaths = 0
    self._timeout = unit_timeout_s
    self._log = log

  @property
  def live_workers(self) -> int:
    return len(self._live)

  def _lost(self, client: WorkerClient, reason: str) -> None:
    self.deaths += 1
    restarted = False
    try:
      restarted = client.restart()
    except Exception as e:  # pylint: disable=broad-except  (a failed restart leaves it dead)
      reason += f'; restart failed: {e}'
    if not restarted:
      self._live.remove(client)
    self._log(f'[evolve] worker {client.name} lost ({reason}); its unit is re-queued; '
              f'{"restarted" if restarted else "not restarted"}, {len(self._live)} live, '
              f'{self.deaths} deaths so far.')

  def run(self, units: Sequence[tuple], should_stop: Optional[Callable[[], bool]] = None) -> list:
    """Results of every unit, in order; None if `should_stop()` turned true first."""
    queue = list(range(len(units)))[::-1]  # pop() takes the first unit
    results: list = [None] * len(units)
    running: dict = {}  # future -> (client, unit index, deadline)
    while queue or running:
      if should_stop is not None and should_stop():
        for future in running:
          future.cancel()
        return None
      busy = {client for client, _, _ in running.values()}
      for client in [c for c in self._live if c not in busy]:
        if not queue:
          break
        index = queue.pop()
        try:
          future = client.submit(*units[index])
        except Exception as e:  # pylint: disable=broad-except  (a pool broken before the call)
          queue.append(index)
          self._lost(client, f'submit failed: {type(e).__name__}: {e}')
          continue
        running[future] = (client, index, time.monotonic() + self._timeout)
      if not running:
        if queue and not self._live:
          raise NoWorkersLeft(f'every worker died ({self.deaths} deaths); {len(queue)} units '
                              'were left unscored.')
        continue
      done, _ = futures.wait(list(running), timeout=0.5, return_when=futures.FIRST_COMPLETED)
      now = time.monotonic()
      for future in list(running):
        client, index, deadline = running[future]
        if future in done:
          del running[future]
          try:
            results[index] = future.result()
          except Exception as e:  # pylint: disable=broad-except  (death, broken connection)
            queue.append(index)
            self._lost(client, f'{type(e).__name__}: {str(e).strip()[:200]}')
        elif not client.alive():
          del running[future]
          queue.append(index)
          self._lost(client, 'its process died')
        elif now > deadline:
          del running[future]
          future.cancel()
          queue.append(index)
          self._lost(client, f'no result within {self._timeout:.0f} s')
    return results


def split_rows(count: int, parts: int) -> list:
  """`count` rows as up to `parts` contiguous, nearly equal slices (none empty)."""
  bounds = np.linspace(0, count, min(parts, count) + 1).round().astype(int)
  return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
