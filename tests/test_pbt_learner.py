"""PBTLearner in-process: exploit/explore on a real learner, without recompiling."""

import threading

import jax
import numpy as np
import pytest

from s3ta.networks import make_network
from s3ta.pbt.learner import PBTLearner
from s3ta.replay import queue as replay
from s3ta.utils.checkpoint import Checkpointer

TINY = dict(kind='s3ta', conv_channels=(4,), conv_kernels=(3,), conv_strides=(2,), vision_lstm_channels=8,
            key_channels=2, num_heads=1, basis_frequencies=1, query_hidden=(8,), answer_hidden=(8,),
            lstm_size=8, head_hidden=8)
T, B = 3, 2


def make_learner(seed):
  network = make_network(TINY, num_actions=18, observation_shape=(8, 8, 1))
  learner = PBTLearner(network, {'learning_rate': 1e-3}, batch_size=B, unroll_length=T, frames_per_step=4,
                       rng_key=jax.random.PRNGKey(seed), normalizer=lambda game, r: r / 10.0)
  return network, learner


def batch(network, seed):
  rng = np.random.default_rng(seed)
  data = {}
  for name, (shape, dtype) in replay.item_spec(network, T).items():
    if name == 'initial_state':
      continue
    if dtype == np.uint8:
      data[name] = rng.integers(0, 255, (B,) + shape).astype(dtype)
    elif dtype == np.bool_:
      data[name] = np.zeros((B,) + shape, bool)
    elif name in ('action', 'prev_action'):
      data[name] = rng.integers(0, 18, (B,) + shape).astype(dtype)
    elif name == 'discount':
      data[name] = np.ones((B,) + shape, dtype)
    else:
      data[name] = rng.normal(size=(B,) + shape).astype(dtype)
  data['initial_state'] = jax.device_get(network.initial_state(B))
  return data


def assert_same_moments(got, want):
  """The optimizer's moments and step count agree (its injected hyperparameters may not)."""
  got, want = got['opt_state'], want['opt_state']
  jax.tree_util.tree_map(np.testing.assert_array_equal, (got.count, got.inner_state),
                         (want.count, want.inner_state))


def test_set_state_copies_donor_and_hyperparams_do_not_recompile():
  network, donor = make_learner(0)
  _, recipient = make_learner(1)
  data = batch(network, 0)
  donor.step_on_batch(data)
  recipient.step_on_batch(data)
  compiled = recipient._sgd_step._cache_size()  # pylint: disable=protected-access
  before = recipient.get_params()['version']
  new_hp = {'learning_rate': 3e-3, 'entropy_cost': 0.02, 'rmsprop_epsilon': 0.1, 'grad_clip': 10.0}
  recipient.set_state(donor.get_state(), new_hp)
  reply = recipient.get_params()
  assert reply['version'] == before + 1  # actors see a new version and refresh
  jax.tree_util.tree_map(np.testing.assert_array_equal, reply['params'], donor.get_params()['params'])
  assert_same_moments(recipient.get_state(), donor.get_state())
  assert float(recipient.get_state()['opt_state'].hyperparams['epsilon']) == pytest.approx(0.1)
  assert recipient.get_hyperparams() == pytest.approx(new_hp)
  recipient.set_hyperparams({'entropy_cost': 0.5})
  assert recipient.get_hyperparams()['entropy_cost'] == pytest.approx(0.5)
  # The new values are used by the next steps, which do not recompile.
  metrics_donor = donor.step_on_batch(data)
  metrics = recipient.step_on_batch(data)
  recipient.step_on_batch(batch(network, 1))
  assert recipient._sgd_step._cache_size() == compiled  # pylint: disable=protected-access
  # From the same parameters on the same batch, only the entropy term's weight differs:
  # loss = pg + 0.5 baseline + cost * sum(pi log pi), and sum(pi log pi) = -entropy * T * B.
  for name in ('pg_loss', 'baseline_loss', 'entropy'):
    assert metrics[name] == pytest.approx(metrics_donor[name], rel=1e-5), name
  entropy_term = -metrics['entropy'] * T * B
  assert metrics['loss'] - metrics_donor['loss'] == pytest.approx((0.5 - 0.01) * entropy_term, rel=1e-3)
  assert recipient.counters.learner_steps == 3 and recipient.counters.learner_frames == 3 * B * T * 4


def test_fitness_window_and_reset_on_exploit():
  network, learner = make_learner(0)
  assert learner.get_fitness()['fitness'] is None
  learner.report_episodes('Pong', [5.0, 15.0])  # 0.5, capped 1.0 -> 0.75
  learner.report_episodes('Breakout', [2.0])  # 0.2
  info = learner.get_fitness()
  assert info['fitness'] == pytest.approx((0.75 + 0.2) / 2) and info['num_episodes'] == 3
  assert set(info['per_game']) == {'Pong', 'Breakout'} and info['frames'] == 0
  _, other = make_learner(1)
  learner.set_state(other.get_state(), learner.get_hyperparams())
  assert learner.get_fitness()['fitness'] is None
  with pytest.raises(ValueError, match='momentum'):
    learner.set_hyperparams({'momentum': 0.9})


def test_exploit_over_real_courier_servers():
  """CourierMember ↔ PBTLearner over courier (arrays as call arguments never arrive: see wire.py)."""
  import courier  # pylint: disable=g-import-not-at-top
  import portpicker  # pylint: disable=g-import-not-at-top
  from launchpad.nodes.courier import courier_utils  # pylint: disable=g-import-not-at-top
  from s3ta.pbt.node import CourierMember, StopRequested  # pylint: disable=g-import-not-at-top
  network, donor = make_learner(0)
  _, recipient = make_learner(1)
  donor.step_on_batch(batch(network, 0))
  servers, members = [], []
  for learner in (recipient, donor):
    port = portpicker.pick_unused_port()
    server = courier_utils.make_courier_server(learner, port=port)
    server.Start()
    servers.append(server)
    members.append(CourierMember(courier.Client(f'localhost:{port}', call_timeout=20), lambda: False))
  try:
    hp = {'learning_rate': 1e-3, 'entropy_cost': 0.03, 'rmsprop_epsilon': 0.01, 'grad_clip': 40.0}
    members[0].set_state(members[1].get_state(), hp)
    jax.tree_util.tree_map(np.testing.assert_array_equal, recipient.get_state()['params'],
                           donor.get_state()['params'])
    assert_same_moments(recipient.get_state(), donor.get_state())
    assert recipient.get_hyperparams() == pytest.approx(hp)
    members[0].set_hyperparams({'entropy_cost': np.float32(0.5)})
    assert recipient.get_hyperparams()['entropy_cost'] == pytest.approx(0.5)
    assert members[1].get_fitness()['learner_steps'] == 1
    stopping = CourierMember(members[0]._client, lambda: True)  # pylint: disable=protected-access
    with pytest.raises(StopRequested):
      stopping.get_fitness()
  finally:
    for server in servers:
      server.Stop()


def test_the_distributed_learner_skips_and_counts_a_nonfinite_batch():
  network, learner = make_learner(0)
  before = learner.get_params()['params']
  data = batch(network, 0)
  data['reward'] = np.full_like(data['reward'], np.nan)  # (inf would be clipped to 1)
  for k in (1, 2):
    metrics = learner.step_on_batch(data)
    assert metrics['nonfinite_in_a_row'] == k and metrics['nonfinite_steps'] == k
  jax.tree_util.tree_map(np.testing.assert_array_equal, learner.get_params()['params'], before)
  assert learner.counters.learner_steps == 2  # counted, not hidden


def test_unfetched_steps_still_update_and_the_next_fetch_reports_them():
  """`run` fetches metrics every few steps; steps in between are dispatched, not skipped."""
  network, deferred = make_learner(0)
  _, eager = make_learner(0)
  data = batch(network, 0)
  data['reward'] = np.full_like(data['reward'], np.nan)
  first = deferred.step_on_batch(data)  # a fetched non-finite step
  assert first['nonfinite_in_a_row'] == 1
  assert deferred.step_on_batch(data, fetch_metrics=False) is deferred.last_metrics  # stale
  third = deferred.step_on_batch(data)
  assert third['nonfinite_in_a_row'] == 3 and deferred.counters.learner_steps == 3
  good = batch(network, 1)
  deferred.step_on_batch(good, fetch_metrics=False)
  for d in (data, data, data, good):
    eager.step_on_batch(d)
  jax.tree_util.tree_map(np.testing.assert_array_equal, deferred.get_params()['params'],
                         eager.get_params()['params'])
  with pytest.raises(ValueError, match='metrics_every_steps must be an integer >= 1, got 0'):
    PBTLearner(network, {}, batch_size=B, unroll_length=T, metrics_every_steps=0)


def test_parameters_are_copied_to_the_host_once_per_version_and_not_resent():
  from s3ta.learning.publishing import ParamsPublisher  # pylint: disable=g-import-not-at-top
  publisher = ParamsPublisher()
  device = {'w': jax.numpy.arange(3.0)}
  first = publisher.get(1, device)
  assert first['version'] == 1 and isinstance(first['params']['w'], np.ndarray)
  assert publisher.get(1, device)['params'] is first['params']  # the same host copy
  assert publisher.get(1, device, known_version=1) == {'version': 1, 'params': None}
  newer = publisher.get(2, {'w': device['w'] + 1})
  np.testing.assert_array_equal(newer['params']['w'], [1.0, 2.0, 3.0])


class _PauseReadJustBeforeItIsSet(threading.Event):
  """A pause flag whose first read returns 'not paused' only after `pause_training` set it:
  the worst interleaving of a training step's pause check with the pause itself."""

  def __init__(self):
    super().__init__()
    self.read = threading.Event()
    self._reads = 0

  def is_set(self) -> bool:
    self._reads += 1
    if self._reads > 1:
      return super().is_set()
    self.read.set()
    assert self.wait(timeout=10.0), 'pause_training never set the flag'
    return False


def test_no_step_is_taken_after_pause_training_returns():
  network, learner = make_learner(0)
  data = batch(network, 0)
  learner.step_on_batch(data)  # compiled; 1 step
  flag = learner._pbt_paused = _PauseReadJustBeforeItIsSet()  # pylint: disable=protected-access
  stepper = threading.Thread(target=learner.step_on_batch, args=(data,))
  stepper.start()
  assert flag.read.wait(timeout=10.0)
  at_rest = learner.pause_training()
  stepper.join(timeout=30.0)
  assert not stepper.is_alive()
  # The step that read the flag before the pause finished before pause_training returned.
  assert at_rest['learner_steps'] == learner.counters.learner_steps == 2


def test_exploit_copies_the_value_offset_with_the_weights():
  # The offset is part of the value the weights were trained with: it must travel with them.
  network = make_network(TINY, num_actions=18, observation_shape=(8, 8, 1))
  learners = [PBTLearner(network, {'learning_rate': 1e-3, 'value_offset_step_size': 0.5},
                         batch_size=B, unroll_length=T, frames_per_step=4,
                         rng_key=jax.random.PRNGKey(seed), normalizer=lambda game, r: r / 10.0)
              for seed in (0, 1)]
  donor, recipient = learners
  donor.step_on_batch(batch(network, 0))
  recipient.step_on_batch(batch(network, 1))
  offsets = [float(learner.get_state()['value_offset']) for learner in learners]
  assert offsets[0] != offsets[1]
  recipient.set_state(donor.get_state(), recipient.get_hyperparams())
  assert float(recipient.get_state()['value_offset']) == offsets[0]


def test_a_restart_keeps_evolved_hyperparameters_unless_the_config_changed_them(tmp_path):
  """A restored member keeps what PBT gave it; a rate the user changed since the checkpoint wins."""
  network = make_network(TINY, num_actions=18, observation_shape=(8, 8, 1))

  def restart(learning_rate):
    config = {'learning_rate': learning_rate}
    checkpointer = Checkpointer(str(tmp_path), interval_s=1e18, config={'learner': config},
                                network_config=TINY)
    return PBTLearner(network, config, batch_size=B, unroll_length=T, frames_per_step=4,
                      rng_key=jax.random.PRNGKey(0), checkpointer=checkpointer)

  first = restart(1e-3)
  first.set_hyperparams({'learning_rate': 2e-3, 'entropy_cost': 0.03})  # explored
  first.save()
  same = restart(1e-3)
  assert same.resumed_from is not None
  assert float(same.get_hyperparams()['learning_rate']) == pytest.approx(2e-3)
  changed = restart(5e-4)
  values = changed.get_hyperparams()
  assert float(values['learning_rate']) == pytest.approx(5e-4)
  assert float(values['entropy_cost']) == pytest.approx(0.03)  # not in the saved config: kept
