"""benchmarks/soak.py's bookkeeping: node names from metrics.jsonl and growth after warm-up."""

import json
import os
import subprocess
import sys

import psutil

from benchmarks import soak


def test_growth_after_warmup_per_named_node(tmp_path):
  with open(os.path.join(tmp_path, 'metrics.jsonl'), 'w') as f:
    for record in ({'label': 'learner', 'pid': 11}, {'label': 'actor_0', 'pid': 12}, {'bad': 1}):
      f.write(json.dumps(record) + '\n')
    f.write('{"truncated li\n')
  names = soak.node_names(str(tmp_path))
  assert names == {11: 'learner', 12: 'actor_0'}
  mib = 2**20
  rows = [{'time': t, 'pid': pid, 'rss': rss * mib} for t, pid, rss in [
      (0, 10, 50), (0, 11, 100), (0, 12, 10), (0, 13, 7),
      (60, 10, 60), (60, 11, 200), (60, 12, 20),  # warm-up ends at 60 s
      (120, 10, 60), (120, 11, 210), (120, 12, 20), (180, 11, 220)]]
  table = soak.growth_table(rows, names, launcher_pid=10, warmup_s=60)
  assert table == [('launcher', 60 * mib, 60 * mib, 0.0), ('learner', 200 * mib, 220 * mib, 0.1),
                   ('actor_0', 20 * mib, 20 * mib, 0.0)]  # pid 13 exited during warm-up


def test_sample_reads_the_launcher_and_its_children_and_a_missing_launcher_is_exit_2(capsys):
  me = psutil.Process()
  # A child holding 64 MiB of touched memory: the sample lists it beside this process.
  child = subprocess.Popen([sys.executable, '-c', 'import time; b = b"x" * (64 << 20); '
                            'print(1, flush=True); time.sleep(60)'], stdout=subprocess.PIPE)
  try:
    child.stdout.readline()  # its memory is allocated
    rss = soak.sample(me)
    assert set(rss) >= {me.pid, child.pid}
    assert rss[child.pid] > 64 << 20
  finally:
    child.kill()
    child.wait()
  assert child.pid not in soak.sample(me)  # an exited node is left out
  assert soak.main(['--launcher_pid=999999999', '--workdir=/nonexistent']) == 2
  assert 'error: no process with --launcher_pid=999999999.' in capsys.readouterr().err
