"""The benchmarks' command lines reject bad input before measuring: one `error:` line, exit 2."""

import os

import pytest

import launcher_runs

BAD = {
    'benchmarks.pipeline': [
        (['--config.batch_size=0', '--skip_end_to_end'],
         'invalid config: config.batch_size must be an integer >= 1, got 0.'),
        # Checked before stages (a)-(c) run (they take minutes), not after them.
        (['--inference=gpu', '--workdir=WORKDIR'],
         "--inference must list 'actor' and/or 'central', got ['gpu']."),
        (['--seconds=-1', '--skip_end_to_end'], '--seconds must be a number > 0, got -1.0.'),
        ([], '--workdir is required for the end-to-end run (or --skip_end_to_end).'),
    ],
    'benchmarks.inference_load': [
        (['--actors=1,two'], "--actors must be integers in [1, 64], got ['1', 'two']."),
        (['--wait_ms=-5', '--transport=direct'],
         'invalid config: config.inference.wait_ms must be in [0, 1000], got -5.0.'),
    ],
}


@pytest.mark.parametrize('module', sorted(BAD))
def test_bad_benchmark_flags_are_one_error_line(module, tmp_path):
  cases = BAD[module]
  argv = [['--config=experiments/smoke.py'] + [a.replace('WORKDIR', str(tmp_path / 'run')) for a in args]
          for args, _ in cases]
  results = launcher_runs.run_each(module, argv, env=dict(os.environ, JAX_PLATFORMS='cpu'), timeout=300)
  for result, (args, message) in zip(results, cases):
    errors = [line for line in result.stderr.splitlines() if line.startswith('error:')]
    assert result.returncode == 2 and errors == [f'error: {message}'], (args, result.stderr[-2000:])
    assert 'Traceback' not in result.stderr and not result.stdout.strip(), (args, result.stdout[-500:])
  assert not (tmp_path / 'run_actor').exists()
