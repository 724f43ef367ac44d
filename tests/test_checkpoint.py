"""Checkpoints: exact round trip of a real TrainingState, keep-last-K, atomicity, clear mismatch errors."""

import dataclasses
import json
import functools
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from s3ta.learning import LearnerConfig, init_training_state
from s3ta.networks import NetworkConfig, make_network
from s3ta.utils import checkpoint

pytestmark = pytest.mark.core  # pure-JAX core only: also run on current JAX

OBS_SHAPE = (16, 16, 3)
TINY = NetworkConfig(conv_channels=(4, 8), conv_kernels=(4, 3), conv_strides=(2, 2),
                     vision_lstm_channels=16, key_channels=4, num_heads=2, basis_frequencies=1,
                     query_hidden=(8,), answer_hidden=(16,), lstm_size=8, head_hidden=8)


@functools.lru_cache(maxsize=None)  # network init compiles; build each state once
def _state(config=TINY, seed=0):
  network = make_network(config, num_actions=4, observation_shape=OBS_SHAPE)
  state = init_training_state(network, LearnerConfig(), jax.random.PRNGKey(seed))
  # Make the optimiser state and step count non-trivial, so the round trip checks real values.
  opt_state = jax.tree_util.tree_map(lambda x: x + 0.5, state.opt_state)
  return state._replace(opt_state=opt_state, steps=jnp.int32(123))


def _assert_trees_equal(a, b):
  assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
  for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
    assert np.asarray(x).dtype == np.asarray(y).dtype
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_round_trip_is_exact(tmp_path):
  state = _state()
  path = checkpoint.save(str(tmp_path), 123, state, counters={'frames': np.int64(4000), 'episodes': 3},
                         config={'game': 'Pong', 'lr': 2e-4}, network_config=TINY)
  assert os.path.basename(path) == 'ckpt_123'
  template = _state(seed=1)  # same structure, different values
  restored = checkpoint.restore(str(tmp_path), template, network_config=TINY)
  _assert_trees_equal(restored.state, state)
  assert (restored.step, restored.counters, restored.path) == (123, {'frames': 4000, 'episodes': 3}, path)
  assert restored.config == {'game': 'Pong', 'lr': 2e-4}
  assert NetworkConfig.from_dict(restored.network_config) == TINY
  # A shape-only template (jax.eval_shape) works too; no pickle anywhere in the checkpoint.
  shapes = jax.eval_shape(lambda: template)
  _assert_trees_equal(checkpoint.restore(path, shapes).state, state)
  assert sorted(os.listdir(path)) == ['metadata.json', 'state.msgpack']


def test_keeps_last_k_and_latest(tmp_path):
  state = {'w': np.arange(3, dtype=np.float32)}
  assert checkpoint.latest_checkpoint(str(tmp_path)) is None
  for step in (10, 20, 5, 30, 40):
    checkpoint.save(str(tmp_path), step, {'w': state['w'] + step}, keep=3)
  assert [s for s, _ in checkpoint.list_checkpoints(str(tmp_path))] == [20, 30, 40]
  assert checkpoint.latest_checkpoint(str(tmp_path)) == str(tmp_path / 'ckpt_40')
  np.testing.assert_array_equal(checkpoint.restore(str(tmp_path), state).state['w'], [40, 41, 42])
  assert sorted(os.listdir(tmp_path)) == ['ckpt_20', 'ckpt_30', 'ckpt_40']  # no leftovers
  # Saving an existing step replaces it.
  checkpoint.save(str(tmp_path), 40, {'w': np.zeros(3, np.float32)}, keep=3)
  np.testing.assert_array_equal(checkpoint.restore(str(tmp_path), state).state['w'], [0, 0, 0])


def test_crash_mid_write_leaves_nothing_latest_returns(tmp_path, monkeypatch):
  state = {'w': np.ones(4, np.float32)}
  checkpoint.save(str(tmp_path), 1, state)

  def crash(path, data):
    with open(path, 'wb') as f:
      f.write(data[:len(data) // 2])  # half a file, then the process "dies"
    raise KeyboardInterrupt

  monkeypatch.setattr(checkpoint.storage, 'write_bytes', crash)
  with pytest.raises(KeyboardInterrupt):
    checkpoint.save(str(tmp_path), 2, state)
  monkeypatch.undo()
  # A hard kill skips cleanup: simulate its leftovers (a temp dir and a half-deleted old checkpoint).
  (tmp_path / '.tmp-ckpt_3-999-abc').mkdir()
  (tmp_path / '.tmp-ckpt_3-999-abc' / 'state.msgpack').write_bytes(b'\x00garbage')
  (tmp_path / '.trash-ckpt_0-abc').mkdir()
  (tmp_path / 'ckpt_7').mkdir()  # incomplete: no state.msgpack / metadata.json
  (tmp_path / 'ckpt_7' / 'metadata.json').write_text('{}')
  assert checkpoint.latest_checkpoint(str(tmp_path)) == str(tmp_path / 'ckpt_1')
  np.testing.assert_array_equal(checkpoint.restore(str(tmp_path), state).state['w'], state['w'])


def test_different_network_config_fails_naming_fields_and_leaf(tmp_path):
  checkpoint.save(str(tmp_path), 5, _state(), network_config=TINY)
  bigger = dataclasses.replace(TINY, lstm_size=16)
  with pytest.raises(ValueError) as error:
    checkpoint.restore(str(tmp_path), _state(bigger), network_config=bigger)
  message = str(error.value)
  assert 'lstm_size: checkpoint 8 vs requested 16' in message
  # The first leaf whose shape differs, with both shapes.
  assert "leaf .params['" in message and 'checkpoint shape (' in message
  assert ') != template shape (' in message
  # Without a network config to compare, the shape check alone still names the leaf.
  with pytest.raises(ValueError, match=re.escape(
      "leaf .params['core']['head']['hidden']['kernel']: checkpoint shape (8, 8) != template shape "
      "(16, 8)")):
    checkpoint.restore(str(tmp_path), _state(bigger))
  # Same shapes, different config field: still refused, naming the field.
  with pytest.raises(ValueError, match="dtype: checkpoint 'float32' vs requested 'bfloat16'"):
    checkpoint.restore(str(tmp_path), _state(), network_config=dataclasses.replace(TINY, dtype='bfloat16'))


def test_structure_and_dtype_mismatch_and_missing(tmp_path):
  checkpoint.save(str(tmp_path), 0, {'a': np.zeros(2, np.float32), 'b': np.zeros(1, np.int32)})
  with pytest.raises(ValueError, match=r"leaf \['c'\] of the template is not in the checkpoint"):
    checkpoint.restore(str(tmp_path), {'a': np.zeros(2, np.float32), 'c': np.zeros(1, np.int32)})
  with pytest.raises(ValueError, match=r"leaf \['b'\] of the checkpoint is not in the template"):
    checkpoint.restore(str(tmp_path), {'a': np.zeros(2, np.float32)})
  with pytest.raises(ValueError, match=r"leaf \['b'\]: checkpoint dtype int32 != template dtype float32"):
    checkpoint.restore(str(tmp_path), {'a': np.zeros(2, np.float32), 'b': np.zeros(1, np.float32)})
  with pytest.raises(ValueError, match='No checkpoint at'):
    checkpoint.restore(str(tmp_path / 'nothing'), {})
  with pytest.raises(ValueError, match='keep must be >= 1'):
    checkpoint.save(str(tmp_path), 1, {}, keep=0)
  with pytest.raises(ValueError, match='counters must be JSON-serialisable'):
    checkpoint.save(str(tmp_path), 1, {}, counters={'x': object()})


def test_checkpointer_interval_and_restore_latest(tmp_path):
  now = [0.0]
  ckpt = checkpoint.Checkpointer(str(tmp_path), keep=2, interval_s=60, network_config=TINY,
                                 config={'seed': 1}, clock=lambda: now[0])
  state = _state()
  assert ckpt.restore_latest(state) is None
  assert ckpt.maybe_save(1, state) is None  # 0 s since construction
  now[0] = 61.0
  assert ckpt.maybe_save(2, state, {'frames': 8}) == str(tmp_path / 'checkpoints' / 'ckpt_2')
  assert ckpt.maybe_save(3, state) is None
  restored = ckpt.restore_latest(_state(seed=3))
  assert restored.step == 2 and restored.counters == {'frames': 8}
  _assert_trees_equal(restored.state, state)
  with open(os.path.join(restored.path, 'metadata.json')) as f:
    assert json.load(f)['config'] == {'seed': 1}


@pytest.mark.parametrize('old', ['s3ta-checkpoint-v1', 's3ta-checkpoint-v2'])
def test_an_older_format_is_refused_naming_both_versions(tmp_path, old):
  state = _state()
  path = checkpoint.save(str(tmp_path), 3, state)
  metadata_path = os.path.join(path, checkpoint.METADATA_FILE)
  with open(metadata_path) as f:
    metadata = json.load(f)
  metadata['format'] = old
  with open(metadata_path, 'w') as f:
    json.dump(metadata, f)
  with pytest.raises(ValueError, match=rf"format '{old}'; this version reads "
                                       r"'s3ta-checkpoint-v3' only \(the hyperparameters moved"):
    checkpoint.restore(path, state)


def test_fields_newer_than_the_checkpoint_and_runtime_switches_do_not_block_a_resume(tmp_path):
  older = {k: v for k, v in dataclasses.asdict(TINY).items() if k not in ('mlp_hidden', 'remat')}
  assert older['scan_unroll'] == 1
  checkpoint.save(str(tmp_path), 5, _state(), network_config=older)  # written before those fields
  restored = checkpoint.restore(str(tmp_path), _state(),  # how the scan runs is no difference
                                network_config=dataclasses.replace(TINY, remat=True, scan_unroll=4))
  assert restored.step == 5
  with pytest.raises(ValueError, match='lstm_size: checkpoint 8 vs requested 16'):
    checkpoint.restore(str(tmp_path), _state(), network_config=dict(older, lstm_size=16))
