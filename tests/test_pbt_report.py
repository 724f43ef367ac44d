"""`python -m s3ta.pbt.report`: the best member's lineage and the PNG."""

import os
import subprocess
import sys

from test_pbt_controller import HP, Clock, FakeMember

from s3ta.pbt.config import PBTConfig
from s3ta.pbt.controller import Controller

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_report_prints_lineage_of_best_member_and_writes_png(tmp_path):
  members = [FakeMember(i) for i in range(3)]
  controller = Controller(PBTConfig(population_size=3, ready_interval_frames=200, burn_in_frames=0,
                                    exploit='truncation', exploit_threshold=0.0, perturb_probability=1.0),
                          members, str(tmp_path), HP, clock=Clock())
  for _ in range(3):
    controller.step()
  result = subprocess.run([sys.executable, '-m', 's3ta.pbt.report', f'--workdir={tmp_path}'], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
  assert result.returncode == 0, result.stderr
  out = result.stdout
  # Member 0 took the weights of member 2 (the fittest) at 200 frames and ties with it (lower id wins).
  assert 'Best member: 0 (fitness 0.2, generation 1' in out
  assert 'init     member 2' in out and 'exploit  member 0 <- weights of member 2' in out
  assert 'explore  member 0' in out
  assert 'Events: 1 exploit, 1 explore' in out
  png = tmp_path / 'pbt_report.png'
  assert png.exists() and png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n' and png.stat().st_size > 10_000
  # Lineage of a member that exploited: init of the donor, then exploit, then explore.
  lineage = [e['event'] for e in controller.records[0].lineage]
  assert lineage == ['init', 'exploit', 'explore'] and controller.records[0].lineage[0]['member'] == 2


def test_report_on_empty_workdir_fails_clearly(tmp_path):
  result = subprocess.run([sys.executable, '-m', 's3ta.pbt.report', f'--workdir={tmp_path}'], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
  assert result.returncode == 2 and 'No PBT state' in result.stderr
