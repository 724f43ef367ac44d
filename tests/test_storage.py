"""A workdir on a remote filesystem: checkpoints commit atomically, metrics survive many writers.

TensorFlow's `ram://` filesystem stands in for Cloud Storage: it is a real non-local
filesystem reached through the same `tf.io.gfile` calls as `gs://`, and the remote
code paths never rename (object stores cannot).
"""

import json
import uuid

import numpy as np
import pytest

from launch import cli
from s3ta.analysis import curves
from s3ta.utils import checkpoint, metrics, storage


@pytest.fixture
def remote_workdir():
  path = f'ram://s3ta-test-{uuid.uuid4().hex}/run'
  yield path
  storage.rmtree(path.rsplit('/', 1)[0])


def _state(value):
  return {'w': np.full((2, 3), value, np.float32), 'steps': np.asarray(value, np.int32)}


def test_paths_are_remote_only_with_a_scheme():
  assert storage.is_remote('gs://bucket/run') and storage.is_remote('ram://x')
  assert not storage.is_remote('/tmp/run') and not storage.is_remote('runs/a')
  assert storage.absolute('gs://bucket/run') == 'gs://bucket/run'
  assert storage.absolute('runs/a').startswith('/')
  assert storage.join('gs://bucket/run/', 'checkpoints', 'ckpt_3') == 'gs://bucket/run/checkpoints/ckpt_3'
  assert storage.basename('gs://bucket/run/') == 'run'


def test_remote_checkpoints_save_keep_and_restore(remote_workdir):
  directory = checkpoint.checkpoint_dir(remote_workdir)
  assert directory == remote_workdir + '/checkpoints'
  for step in range(1, 5):
    checkpoint.save(directory, step, _state(step), counters={'frames': 10 * step},
                    network_config={'kind': 'nature'}, keep=3)
  assert [step for step, _ in checkpoint.list_checkpoints(directory)] == [2, 3, 4]
  assert sorted(storage.listdir(directory)) == ['ckpt_2', 'ckpt_3', 'ckpt_4']  # no leftovers
  restored = checkpoint.restore(directory, _state(0), network_config={'kind': 'nature'})
  assert restored.step == 4 and restored.counters == {'frames': 40}
  np.testing.assert_array_equal(restored.state['w'], np.full((2, 3), 4, np.float32))
  checkpoint.save(directory, 4, _state(7), keep=3)  # the same step again replaces it
  np.testing.assert_array_equal(checkpoint.restore(directory, _state(0)).state['w'],
                                np.full((2, 3), 7, np.float32))


def test_a_crash_before_the_commit_marker_leaves_the_last_checkpoint_in_charge(
    remote_workdir, monkeypatch):
  directory = checkpoint.checkpoint_dir(remote_workdir)
  checkpoint.save(directory, 1, _state(1))
  real_write = storage.write_bytes

  def crash_on_metadata(path, data):
    if path.endswith(checkpoint.METADATA_FILE):
      raise OSError('simulated crash after the state was written')
    real_write(path, data)

  monkeypatch.setattr(storage, 'write_bytes', crash_on_metadata)
  with pytest.raises(OSError, match='simulated crash'):
    checkpoint.save(directory, 2, _state(2))
  monkeypatch.setattr(storage, 'write_bytes', real_write)
  # ckpt_2 holds a complete state file but no metadata: it is not a checkpoint.
  assert storage.isfile(f'{directory}/ckpt_2/{checkpoint.STATE_FILE}')
  assert checkpoint.latest_checkpoint(directory) == f'{directory}/ckpt_1'
  assert checkpoint.check_restorable(directory) == f'{directory}/ckpt_1'
  assert checkpoint.restore(directory, _state(0)).step == 1
  checkpoint.save(directory, 2, _state(2))  # the next save of that step completes it
  assert checkpoint.restore(directory, _state(0)).step == 2


def test_remote_metrics_from_many_writers_are_chunks_that_readers_merge(remote_workdir):
  clock = [0.0]
  learner = metrics.MetricsWriter(remote_workdir, 'learner', tensorboard=False, clock=lambda: 100.0 + clock[0])
  actor = metrics.MetricsWriter(remote_workdir, 'actor_0', tensorboard=False, clock=lambda: 100.5 + clock[0])
  for step in range(3):
    clock[0] = float(step)
    learner.write(step, {'learner_frames': 1000 * step, 'train_seconds': step}, frames=1000 * step)
    learner.flush()  # within REMOTE_FLUSH_S of the writer's start: buffered, no object yet
    actor.write(step, {'window_episodes': 1, 'window_return_mean': -21.0 + step})
  assert not storage.exists(f'{remote_workdir}/{metrics.JSONL_FILE}')  # nothing appends remotely
  assert not storage.listdir(f'{remote_workdir}/{metrics.JSONL_CHUNKS_DIR}')
  learner.close()
  actor.close()
  chunks = storage.listdir(f'{remote_workdir}/{metrics.JSONL_CHUNKS_DIR}')
  assert len(chunks) == 2 and sorted(name.split('-')[0] for name in chunks) == ['actor_0', 'learner']
  records = curves.load_records(remote_workdir)
  assert [(r['label'], r['step']) for r in records] == [
      ('learner', 0), ('actor_0', 0), ('learner', 1), ('actor_0', 1), ('learner', 2), ('actor_0', 2)]
  assert [r['window_return_mean'] for r in records if r['label'] == 'actor_0'] == [-21.0, -20.0, -19.0]
  lines = metrics.read_jsonl_lines(remote_workdir)
  assert all(json.loads(line)['label'] in ('learner', 'actor_0') for line in lines)


def test_a_remote_writer_writes_a_chunk_once_its_period_has_passed(remote_workdir):
  now = [0.0]
  chunked = metrics._ChunkedJsonl(f'{remote_workdir}/chunks', 'learner', period_s=60.0,
                                  clock=lambda: now[0])
  chunked.write('{"time": 1}\n')
  chunked.flush()
  assert storage.listdir(f'{remote_workdir}/chunks') == []
  now[0] = 61.0
  chunked.write('{"time": 2}\n')
  chunked.flush()
  [name] = storage.listdir(f'{remote_workdir}/chunks')
  assert storage.read_bytes(f'{remote_workdir}/chunks/{name}') == b'{"time": 1}\n{"time": 2}\n'
  chunked.flush(force=True)  # nothing buffered: no empty object
  assert len(storage.listdir(f'{remote_workdir}/chunks')) == 1


def test_remote_workdir_check_writes_and_removes_a_probe(remote_workdir, monkeypatch):
  written = []
  write_bytes = storage.write_bytes
  monkeypatch.setattr(storage, 'write_bytes',
                      lambda path, data: written.append(path) or write_bytes(path, data))
  cli.check_workdir(remote_workdir, {'kind': 'nature'})
  assert len(written) == 1 and written[0].startswith(f'{remote_workdir}/.write-test-')
  assert storage.listdir(remote_workdir) == []  # and removed again

  def refuse(path, data):
    raise PermissionError(13, 'Permission denied')

  monkeypatch.setattr(storage, 'write_bytes', refuse)
  with pytest.raises(ValueError, match=r"workdir 'ram://.*' is not a writable directory "
                                       r"\(Permission denied\)"):
    cli.check_workdir(remote_workdir, {'kind': 'nature'})
  with pytest.raises(ValueError, match='CSV metrics are written to local workdirs only'):
    metrics.MetricsWriter(remote_workdir, 'learner', tensorboard=False, csv_file=True)
