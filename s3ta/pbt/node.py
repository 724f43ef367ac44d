"""The PBT controller as a Launchpad node (the only `s3ta.pbt` module that imports Launchpad).

`ControllerNode(config, learner_clients, workdir, base_hyperparams, ...)` is built
inside its node process by `launch/pbt.py`; Launchpad dereferences the learner
handles into courier clients, which satisfy `controller.Member` directly
(`get_fitness`, `get_state`, `set_state`, `set_hyperparams`; see
`s3ta.pbt.learner.PBTLearner`). Clients must have a `call_timeout` (trap 2): a
member that does not answer is skipped for that poll.
"""

from concurrent import futures
import logging
import os
import time
from typing import Callable, Mapping, Optional, Sequence

from s3ta.pbt.config import PBTConfig
from s3ta.pbt import wire
from s3ta.pbt.controller import Controller
from s3ta.utils.metrics import MetricsWriter


def tensorboard_writer(workdir: str, population_size: int):
  """Per-member TensorBoard scalars (`<workdir>/tensorboard/pbt_member_<m>/`) via MetricsWriter."""
  writers = {}

  def write(member_id: int, name: str, value: float, step: int) -> None:
    if member_id not in writers:
      writers[member_id] = MetricsWriter(os.path.join(workdir, 'pbt_metrics'), f'pbt_member_{member_id}',
                                         tensorboard=True)
    writers[member_id].write(int(step), {name: value})

  del population_size
  return write


class StopRequested(Exception):
  """The program is stopping: a pending courier call was abandoned."""


class CourierMember:
  """`controller.Member` over a courier client, abandoning calls when the program stops.

  Calls go through `client.futures` and are waited on in short slices, so a stop
  request is noticed within `poll_s` even while a learner is unresponsive (the
  client's own `call_timeout` still bounds every call)."""

  def __init__(self, client, should_stop: Callable[[], bool], poll_s: float = 0.25):
    self._client = client
    self._should_stop = should_stop
    self._poll_s = poll_s

  def _call(self, method: str, *args, **kwargs):
    if self._should_stop():
      raise StopRequested(method)
    future = getattr(self._client.futures, method)(*args, **kwargs)
    while True:
      try:
        return future.result(timeout=self._poll_s)
      except futures.TimeoutError:
        if self._should_stop():
          future.cancel()
          raise StopRequested(method)  # pylint: disable=raise-missing-from

  def get_fitness(self):
    return self._call('get_fitness')

  def get_state(self):
    return self._call('get_state')

  def set_state(self, state, hyperparams):
    # Arrays as courier arguments never arrive (see wire.py): send one bytes blob.
    return self._call('set_state', wire.encode_state(state), wire.plain_hyperparams(hyperparams))

  def set_hyperparams(self, hyperparams):
    return self._call('set_hyperparams', wire.plain_hyperparams(hyperparams))

  def finish(self):
    return self._call('finish')


class ControllerNode:
  """Runs `Controller.run`, then ends the program cleanly.

  The run ends when every learner has finished its own budget (they keep serving,
  see `PBTLearner.run`) or after `max_seconds`, when the controller asks each
  learner to `finish()` and waits (up to `finish_grace_s`) until all are done;
  then it calls `lp.stop()`. Learners never stop the program themselves."""

  def __init__(self, config, learner_clients: Sequence, workdir: str, base_hyperparams: Mapping[str, float],
               init_ranges: Optional[Mapping] = None, max_seconds: float = 0.0, tensorboard: bool = True,
               finish_grace_s: float = 60.0):
    self._config = config if isinstance(config, PBTConfig) else PBTConfig.from_dict(config)
    self._clients = list(learner_clients)
    self._workdir = workdir
    self._base = dict(base_hyperparams)
    self._init_ranges = dict(init_ranges or {})
    self._max_seconds = max_seconds
    self._tensorboard = tensorboard
    self._finish_grace_s = finish_grace_s

  def run(self) -> None:
    # Launchpad only once the node runs: s3ta.pbt imports without it (tests, reports).
    import launchpad as lp  # pylint: disable=g-import-not-at-top
    logging.getLogger().setLevel(logging.INFO)
    stop_event = lp.stop_event()
    writer = tensorboard_writer(self._workdir, len(self._clients)) if self._tensorboard else None
    start = time.time()
    timed_out = lambda: bool(self._max_seconds) and time.time() - start >= self._max_seconds
    should_stop = lambda: stop_event.is_set() or timed_out()
    members = [CourierMember(client, stop_event.is_set) for client in self._clients]
    controller = Controller(self._config, members, self._workdir, self._base, self._init_ranges,
                            scalar_writer=writer)
    print(f'[pbt] controller {"resumed" if controller.restored else "started"}: '
          f'{self._config.population_size} members, exploit={self._config.exploit}, '
          f'evolve={list(self._config.evolve)}', flush=True)
    controller.run(should_stop)
    if not stop_event.is_set():
      # Clean shutdown: every learner ends its loop (closing its Reverb iterator) while
      # the Reverb servers still run, then the whole program stops.
      if not controller.all_done():
        print(f'[pbt] {time.strftime("%H:%M:%S")} time is up: asking every learner to finish', flush=True)
        for member in members:
          try:
            member.finish()
          except Exception as e:  # pylint: disable=broad-except
            logging.warning('PBT: could not ask a learner to finish: %s', e)
        grace = time.time() + self._finish_grace_s
        while not stop_event.is_set() and not controller.all_done() and time.time() < grace:
          time.sleep(1.0)
          controller.step(evolve=False)
    controller.save()
    print(f'[pbt] {time.strftime("%H:%M:%S")} controller done (all learners done: {controller.all_done()}): '
          f'{controller.counters}', flush=True)
    if not stop_event.is_set():
      lp.stop()
