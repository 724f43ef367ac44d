"""A population member's learner: the distributed `Learner` plus the PBT courier methods.

`PBTLearner` adds what the controller's `Member` protocol needs (see
`s3ta.pbt.controller.Member`) and one method for the member's actors:

- `report_episodes(game, returns)`: actors send finished episode returns here;
- `get_fitness()`: {'frames', 'fitness', 'num_episodes', 'per_game', 'hyperparams'};
- `get_state()` / `set_state(state, hyperparams)`: exploit (params + optimiser state);
- `get_hyperparams()` / `set_hyperparams(hyperparams)`: explore;
- `finish()`: end this member's training loop (the controller's clean shutdown);
- `pause_training()` / `resume_training()`: hold the training loop between batches
  (courier keeps serving; used by tests to compare params at rest, and by operators).

Hyperparameters are float32 data inside `TrainingState`, so changing them never
recompiles the jitted step. `set_state` bumps `param_version`, so the member's
actors pick the copied parameters up at their next regular refresh. A lock
serialises these calls with `step_on_batch`, which courier runs in other threads.
"""

import threading
import time
from typing import Mapping, Optional

import jax

from s3ta.learning.learner import Learner
from s3ta.learning import learner_core
from s3ta.pbt import wire
from s3ta.pbt.fitness import FitnessTracker, Normalizer


def hyperparams_to_dict(state: learner_core.TrainingState) -> dict:
  return {name: float(value) for name, value in learner_core.get_hyperparams(state).items()}


class PBTLearner(Learner):
  """`Learner` with PBT courier methods. Extra keyword args: fitness_window, normalizer."""

  def __init__(self, *args, fitness_window: int = 100, normalizer: Optional[Normalizer] = None,
               **kwargs):
    # `finish()` ends this member's training loop without stopping the program; the
    # program-wide stop (kwargs['should_stop']) still ends it too.
    self._pbt_finish = threading.Event()
    self._pbt_done = threading.Event()
    program_stopping = kwargs.get('should_stop') or (lambda: False)
    self._pbt_program_stopping = program_stopping
    kwargs['should_stop'] = lambda: program_stopping() or self._pbt_finish.is_set()
    super().__init__(*args, **kwargs)
    self._pbt_lock = threading.RLock()
    self._pbt_fitness = FitnessTracker(window=fitness_window, normalizer=normalizer)
    self._pbt_paused = threading.Event()
    self._pbt_state_treedef = None
    self.pbt_changes = 0

  def step_on_batch(self, data: dict, fetch_metrics: bool = True) -> dict:
    data = dict(data)
    # Reverb/tf.data rebuilds namedtuples as its own look-alike classes; give the
    # recurrent state the network's pytree structure again (same fields, same order).
    if self._pbt_state_treedef is None:
      self._pbt_state_treedef = jax.tree_util.tree_structure(self._network.initial_state(1))
    data['initial_state'] = jax.tree_util.tree_unflatten(self._pbt_state_treedef,
                                                         jax.tree_util.tree_leaves(data['initial_state']))
    while True:  # the pause is checked under the lock that `pause_training` takes: no step slips past it
      with self._pbt_lock:
        if not self._pbt_paused.is_set() or self._should_stop():
          return super().step_on_batch(data, fetch_metrics)
      time.sleep(0.05)

  def run(self) -> str:
    """Trains (see `Learner.run`), then keeps serving courier calls until the program stops.

    A member that reached its budget (or was asked to `finish`) thus still answers
    the controller (`get_fitness()['done']` is True), and its Reverb iterator is
    already closed when the program-wide stop shuts the Reverb servers down."""
    reason = super().run()
    self._pbt_done.set()
    print(f'[pbt learner] {time.strftime("%H:%M:%S")} training finished ({reason}); serving until the '
          'program stops', flush=True)
    while not self._pbt_program_stopping():
      time.sleep(0.2)
    return reason

  # ---------------------------------------------------------------- PBT RPCs
  def finish(self) -> None:
    """Ends the training loop at the next batch (clean shutdown of one member)."""
    self._pbt_finish.set()
    print(f'[pbt learner] {time.strftime("%H:%M:%S")} asked to finish at step '
          f'{self.counters.learner_steps}', flush=True)

  def pause_training(self) -> dict:
    """Stops taking sgd steps (after the current one); returns the counters at rest."""
    self._pbt_paused.set()
    with self._pbt_lock:  # waits for a step in flight
      return self.counters.as_dict()

  def resume_training(self) -> None:
    self._pbt_paused.clear()

  def report_episodes(self, game: str, returns) -> None:
    with self._pbt_lock:
      for episode_return in returns:
        self._pbt_fitness.add(game, float(episode_return))

  def get_fitness(self) -> dict:
    with self._pbt_lock:
      summary = self._pbt_fitness.summary(self.counters.learner_frames)
      summary['hyperparams'] = hyperparams_to_dict(self._state)
      summary['learner_steps'] = int(self.counters.learner_steps)
      summary['done'] = self._pbt_done.is_set()
      return summary

  def get_hyperparams(self) -> dict:
    with self._pbt_lock:
      return hyperparams_to_dict(self._state)

  def set_hyperparams(self, hyperparams: Mapping[str, float]) -> None:
    with self._pbt_lock:
      self._state = learner_core.set_hyperparams(self._state, hyperparams)
      self.pbt_changes += 1

  def get_state(self) -> dict:
    """Host copies of params, optimiser state and value offset (what exploit transfers; the
    offset belongs to the value head it is added to)."""
    with self._pbt_lock:
      return {'params': jax.device_get(self._state.params),
              'opt_state': jax.device_get(self._state.opt_state),
              'value_offset': jax.device_get(self._state.value_offset)}

  def set_state(self, state, hyperparams: Mapping[str, float]) -> None:
    """Takes another member's params + optimiser state and hyperparameters.

    `state` is `get_state()`'s dict, or its `wire.encode_state` bytes (over courier).

    Keeps this learner's own step and frame counters; forgets its recent episodes
    (they measured the replaced weights); bumps `param_version` so actors refresh."""
    state = wire.decode_state(state)
    with self._pbt_lock:
      put = lambda tree: jax.device_put(tree, self.device)
      self._state = learner_core.set_hyperparams(
          self._state._replace(params=put(state['params']), opt_state=put(state['opt_state']),
                               value_offset=put(state.get('value_offset'))),
          hyperparams)
      self.counters.param_version += 1
      self._pbt_fitness.reset()
      self.pbt_changes += 1
