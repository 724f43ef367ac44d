"""The single-machine trainer end to end: workdir, resume, determinism, Atari backends, bad input."""

import json
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

import launcher_runs
from experiments import atari_fast, catch
from launch import fork, train_single
from s3ta.envs import factory
from s3ta.networks import make_network
from s3ta.utils import checkpoint as checkpoint_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tiny_catch(steps: int = 6):
  config = catch.get_config('s3ta')
  config.env.num_envs = 8
  config.batch_size = 4  # 2 sgd steps per unroll of the 8 envs
  config.unroll_length = 5
  config.max_frames = 0
  config.max_learner_steps = steps
  config.log_period_s = 0.01
  config.evaluator.num_episodes = 4
  config.evaluator.num_envs = 4
  config.single_machine.env_groups = 2
  config.single_machine.policy_lag = 1
  return config


def _records(workdir):
  with open(os.path.join(workdir, 'metrics.jsonl')) as f:
    return [json.loads(line) for line in f]


def test_catch_run_writes_the_workdir_and_resumes(tmp_path, tmp_path_factory):
  lines = []
  result = train_single.train(_tiny_catch(6), str(tmp_path), log=lines.append)
  assert result.reason == 'max_learner_steps'
  # 8 envs x 5 steps per unroll = 2 batches of 4 x 5 frames: 3 unrolls for 6 steps.
  assert result.counters['learner_steps'] == 6 and result.counters['learner_frames'] == 6 * 4 * 5
  records = _records(tmp_path)
  labels = {r['label'] for r in records}
  assert labels == {'learner', 'actor_0', 'evaluator'}
  final = [r for r in records if r['label'] == 'learner' and r.get('final')]
  assert len(final) == 1 and final[0]['learner_steps'] == 6 and final[0]['stop_reason_code'] == 2
  # Unroll i acts with the parameters after unroll i - 2 (version 2i - 2), and its two batches
  # update versions 2i and 2i + 1: a lag of 2 and 3 once the first two unrolls (version 0) passed.
  lags = [r['policy_lag_max'] for r in records if 'policy_lag_max' in r]
  assert max(lags) == 3, lags
  evaluations = [r for r in records if r['label'] == 'evaluator']
  assert evaluations[-1]['param_version'] == 6 and evaluations[-1]['frames'] == 120
  assert evaluations[-1]['episodes'] == 4
  assert any('Run summary' in line for line in lines)
  assert os.path.isdir(os.path.join(tmp_path, 'tensorboard', 'learner'))
  path = checkpoint_lib.latest_checkpoint(checkpoint_lib.checkpoint_dir(str(tmp_path)))
  assert path.endswith('ckpt_6')

  again = train_single.train(_tiny_catch(10), str(tmp_path), log=lines.append)
  assert any('resumed from' in line and 'ckpt_6' in line for line in lines)
  assert again.counters['learner_steps'] == 10 and again.counters['learner_frames'] == 200
  assert again.counters['train_seconds'] > result.counters['train_seconds']

  # A fork at ckpt_6 goes on with another learning rate: the optimizer state holds the old
  # rate, and the new one must win (said in one line).
  forked = str(tmp_path_factory.mktemp('fork'))
  assert fork.main([f'--from={tmp_path}', '--step=6', f'--to={forked}']) == 0
  config = _tiny_catch(8)
  config.learner.learning_rate = 1.5e-3
  branch = train_single.train(config, forked, log=lines.append)
  assert any('resumed from' in line and forked in line and 'ckpt_6' in line for line in lines)
  assert branch.counters['learner_steps'] == 8
  old_rate = _tiny_catch().learner.learning_rate
  assert any(f'applied: learning_rate {old_rate!r} -> 0.0015' in line for line in lines), lines
  final = [r for r in _records(forked) if r['label'] == 'learner' and r.get('final')]
  assert len(final) == 1 and final[0]['train/learning_rate'] == pytest.approx(1.5e-3)
  trunk = [r for r in _records(forked) if r['label'] == 'learner' and r['learner_steps'] <= 6]
  assert trunk  # the records up to ckpt_6 came along for the curves


def test_ppo_runs_through_the_same_trainer_and_resumes(tmp_path):
  config = _tiny_catch(4)
  config.single_machine.algorithm = 'ppo'
  config.ppo.epochs, config.ppo.num_minibatches = 2, 2  # 4 minibatch steps per update
  result = train_single.train(config, str(tmp_path), log=lambda line: None)
  assert result.reason == 'max_learner_steps' and result.counters['learner_steps'] == 4
  final = [r for r in _records(tmp_path) if r['label'] == 'learner' and r.get('final')][0]
  assert 0.0 <= final['train/clip_fraction'] <= 1.0 and final['train/nonfinite_steps'] == 0
  # catch.py anneals PPO's rate to 0 over 1250 updates (x 4 minibatch steps); the last
  # (16th) minibatch step ran at the rate of optimizer count 15.
  assert final['train/learning_rate'] == pytest.approx(2.5e-4 * (1 - 15 / (1250 * 4)))
  config.max_learner_steps = 6
  lines = []
  again = train_single.train(config, str(tmp_path), log=lines.append)
  assert any('resumed from' in line and 'ckpt_4' in line for line in lines), lines
  assert again.counters['learner_steps'] == 6
  assert again.counters['train_seconds'] > result.counters['train_seconds']
  # The two updates after the resume continue Adam's count and the annealing: steps 16-23.
  finals = [r for r in _records(tmp_path) if r['label'] == 'learner' and r.get('final')]
  assert len(finals) == 2 and finals[-1]['learner_steps'] == 6
  assert finals[-1]['train/learning_rate'] == pytest.approx(2.5e-4 * (1 - 23 / (1250 * 4)))


def test_same_seed_same_run(tmp_path):
  """The fixed policy lag makes a run independent of thread timing."""
  a = train_single.train(_tiny_catch(6), str(tmp_path / 'a'), log=lambda line: None)
  b = train_single.train(_tiny_catch(6), str(tmp_path / 'b'), log=lambda line: None)
  assert jax.tree_util.tree_structure(a.params) == jax.tree_util.tree_structure(b.params)
  jax.tree_util.tree_map(np.testing.assert_array_equal, a.params, b.params)
  initial = _initial_params(_tiny_catch(6))
  assert any(np.any(x != y) for x, y in zip(jax.tree_util.tree_leaves(a.params),
                                            jax.tree_util.tree_leaves(initial)))  # it trained
  # Records are written on a wall-clock period, so the two runs may log at different steps;
  # the loss at any one learner step, and the final record's, must agree.
  losses = [{r['learner_steps']: r['train/loss'] for r in _records(tmp_path / run)
             if 'train/loss' in r} for run in ('a', 'b')]
  common = losses[0].keys() & losses[1].keys()
  assert 6 in common and all(losses[0][step] == losses[1][step] for step in common)


def _initial_params(config):
  """The parameters `train_single.train(config, ...)` starts from (its key split)."""
  settings = train_single.validate_config(config)
  num_actions, observation_shape = factory.env_spec(config.env)
  network = make_network(config.network.to_dict(), num_actions, observation_shape)
  params_key = jax.random.split(jax.random.PRNGKey(config.seed), 3)[0]
  return jax.device_get(train_single.make_update(settings, config, network, params_key)[0].params)


@pytest.mark.parametrize('backend', ['envpool', 'ale'])
def test_atari_fast_baseline_runs_on_both_backends(tmp_path, backend):
  config = atari_fast.get_config('')
  config.env.backend = backend
  config.env.num_envs = 2  # 4 environments in 2 groups
  config.batch_size = 4
  config.unroll_length = 4
  config.network.nature_channels = (4, 8, 8)
  config.network.nature_hidden = 16
  config.max_frames = 0
  config.max_seconds = 0.0
  config.max_learner_steps = 3
  config.evaluator.enabled = False
  # Both backends give the fast baseline the same spec: Pong's minimal 6 actions, 4 gray 84x84 frames.
  assert factory.env_spec(config.env) == (6, (84, 84, 4))
  result = train_single.train(config, str(tmp_path), log=lambda line: None)
  assert result.counters['learner_frames'] == 3 * 4 * 4 * 4  # steps x B x T x action repeat
  assert result.env_steps >= 3 * 4  # the learner's 3 batches of 4 envs x 4 steps were acted
  learner = [r for r in _records(tmp_path) if r['label'] == 'learner' and 'train/loss' in r]
  assert learner and all(np.isfinite(r['train/loss']) for r in learner)
  initial = _initial_params(config)
  assert any(np.any(x != y) for x, y in zip(jax.tree_util.tree_leaves(result.params),
                                            jax.tree_util.tree_leaves(initial)))  # it learned from them


def _cli(tmp_path, *args, timeout=120):
  env = dict(os.environ, JAX_PLATFORMS='cpu')
  return subprocess.run([sys.executable, '-m', 'launch.train_single', f'--workdir={tmp_path}',
                         *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


BAD_INPUTS = [
    (['--config=experiments/catch.py', '--config.single_machine.device=gpu'],
     "config.single_machine.device='gpu', but JAX sees no gpu"),
    (['--config=experiments/catch.py', '--config.single_machine.device=cuda'],
     "config.single_machine.device must be one of ('auto', 'cpu', 'gpu', 'tpu'), got 'cuda'"),
    (['--config=experiments/atari_fast.py', '--config.env.backend=gym'],
     "Unknown config.env.backend 'gym'; valid: ('envpool', 'ale')"),
    (['--config=experiments/atari_fast.py', '--config.env.backend=ale', '--config.env.game=Pongg'],
     "Unknown Atari game 'Pongg' for backend 'ale'; valid games"),
    (['--config=experiments/catch.py', '--config.learner.learning_rat=0.1'],
     'unknown config key config.learner.learning_rat (did you mean config.learner.learning_rate'),
    (['--config=experiments/catch.py', '--config.batch_size=abc'],
     "flag --config.batch_size=abc: invalid literal for int() with base 10: 'abc'"),
    (['--config=experiments/catch.py', '--config.single_machine.algorithm=a2c'],
     "config.single_machine.algorithm must be one of ('impala', 'ppo'), got 'a2c'"),
    (['--config=experiments/catch.py', '--config.single_machine.algorithm=ppo',
      '--config.ppo.num_minibatches=5'],
     'config.ppo.num_minibatches (5) must divide config.batch_size (32)'),
    (['--config=experiments/catch.py', '--config.single_machine.algorithm=ppo',
      '--config.ppo.minibatch_axis=samples', '--config.ppo.num_minibatches=7'],
     'config.ppo.num_minibatches (7) must divide the 320 steps of one update'),
    (['--config=experiments/catch.py', '--config.single_machine.algorithm=ppo',
      '--config.ppo.minibatch_axis=samples'],
     "minibatch_axis='samples' needs an agent without recurrent state; network.kind 's3ta'"),
    (['--config=experiments/catch.py', '--config.batch_size=5'],
     'config.batch_size (5) must divide the number of environments (32'),
    (['--config=experiments/cacth.py'],
     "--config file 'experiments/cacth.py' does not exist; experiments/ holds atari_expert.py, "
     'atari_fast.py'),
    # NaN passes every `x < 0` check: a NaN time limit never stopped, a NaN rate trained.
    (['--config=experiments/catch.py', '--config.max_seconds=nan'],
     'invalid config: config.max_seconds must be a number, got nan.'),
    (['--config=experiments/catch.py', '--config.learner.learning_rate=nan'],
     'invalid config: config.learner.learning_rate must be a number, got nan.'),
    (['--config=experiments/catch.py', '--config.max_seconds=inf'],
     'invalid config: config.max_seconds must be a finite number >= 0, got inf.'),
    (['--config=experiments/catch.py', '--config.network.conv_strides=(0,)'],
     'invalid config: conv_strides must be integers >= 1, got (0,).'),
    (['--config=experiments/catch.py', '--config.seed=18446744073709551616'],
     'invalid config: config.seed must be an integer in [0, 2**31), got 18446744073709551616.'),
]


@pytest.fixture(scope='module')
def bad_input_runs(tmp_path_factory):
  """BAD_INPUTS[1:] in one process (tests/launcher_runs.py); BAD_INPUTS[0] runs as `python -m`."""
  root = tmp_path_factory.mktemp('bad_inputs')
  return launcher_runs.run_all_but_first(
      'launch.train_single', [(root / str(i), [f'--workdir={root / str(i)}', *args])
                              for i, (args, _) in enumerate(BAD_INPUTS)],
      env=dict(os.environ, JAX_PLATFORMS='cpu'))


@pytest.mark.parametrize('case', range(len(BAD_INPUTS)), ids=[' '.join(a[1:]) for a, _ in BAD_INPUTS])
def test_bad_input_is_one_line_and_exit_2(tmp_path, bad_input_runs, case):
  args, message = BAD_INPUTS[case]
  result, workdir = (_cli(tmp_path, *args), tmp_path) if case == 0 else bad_input_runs[case]
  errors = [line for line in result.stderr.splitlines() if line.startswith('error:')]
  assert result.returncode == 2 and len(errors) == 1 and message in errors[0], result.stderr[-3000:]
  assert not os.path.exists(os.path.join(workdir, 'checkpoints'))


def test_ctrl_c_saves_a_final_checkpoint_and_exits_130(tmp_path):
  env = dict(os.environ, JAX_PLATFORMS='cpu')
  process = subprocess.Popen(
      [sys.executable, '-m', 'launch.train_single', '--config=experiments/catch.py',
       f'--workdir={tmp_path}', '--config.log_period_s=0.5', '--config.evaluator.enabled=False'],
      cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  metrics = os.path.join(tmp_path, 'metrics.jsonl')
  deadline = time.time() + 90
  while time.time() < deadline and not (
      os.path.exists(metrics) and any('"learner"' in line for line in open(metrics))):
    time.sleep(0.5)
  process.send_signal(signal.SIGINT)
  output, _ = process.communicate(timeout=60)
  assert process.returncode == 130, output[-3000:]
  assert 'Run summary' in output and 'interrupted' in output
  final = [r for r in _records(tmp_path) if r['label'] == 'learner' and r.get('final')]
  assert final and final[-1]['stop_reason_code'] == 4  # 'stop requested'
  path = checkpoint_lib.latest_checkpoint(checkpoint_lib.checkpoint_dir(str(tmp_path)))
  assert path.endswith(f'ckpt_{int(final[-1]["learner_steps"])}')


@pytest.mark.parametrize('signum, code', [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_start_up_still_saves_and_exits(tmp_path, signum, code):
  # Sent while the first jitted calls compile: it must not land inside JAX's dispatch (which
  # could leave a buffer that never becomes ready and hang the run); the run stops at its
  # next check, saves and exits with the signal's code.
  env = dict(os.environ, JAX_PLATFORMS='cpu')
  process = subprocess.Popen(
      [sys.executable, '-m', 'launch.train_single', '--config=experiments/catch.py',
       f'--workdir={tmp_path}', '--config.evaluator.enabled=False'],
      cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  first_line = process.stdout.readline()  # the device warning: set-up and compiling follow
  time.sleep(1.0)
  process.send_signal(signum)
  output, _ = process.communicate(timeout=240)
  output = first_line + output
  assert process.returncode == code, output[-3000:]
  assert 'Run summary' in output and 'saved a final checkpoint' in output, output[-3000:]
  final = [r for r in _records(tmp_path) if r['label'] == 'learner' and r.get('final')]
  assert final and final[-1]['stop_reason_code'] == 4, output[-3000:]  # 'stop requested'
  assert checkpoint_lib.latest_checkpoint(checkpoint_lib.checkpoint_dir(str(tmp_path)))


def test_a_diverged_run_halts_after_k_skipped_updates_and_keeps_the_last_finite_state(tmp_path):
  # A learning rate of 1e30 sends the parameters to ~1e30 in the first step (still finite);
  # every later step overflows to NaN/Inf and is skipped, so the run halts after K = 3.
  result = _cli(tmp_path, '--config=experiments/catch.py', '--config.learner.learning_rate=1e30',
                '--config.learner.max_nonfinite_in_a_row=3', '--config.evaluator.enabled=False',
                timeout=300)
  assert result.returncode == 1, result.stderr[-3000:]
  halts = [line for line in result.stderr.splitlines() if 'halted: 3 sgd steps in a row' in line]
  path = checkpoint_lib.latest_checkpoint(checkpoint_lib.checkpoint_dir(str(tmp_path)))
  assert len(halts) == 1 and f'Last good checkpoint: {path}.' in halts[0], result.stderr[-3000:]
  final = [r for r in _records(tmp_path) if r['label'] == 'learner' and r.get('final')]
  assert final[0]['stop_reason_code'] == 5  # 'non-finite'
  assert final[0]['train/nonfinite_in_a_row'] == 3 and final[0]['learner_steps'] >= 4
  from flax import serialization  # pylint: disable=g-import-not-at-top
  with open(os.path.join(path, checkpoint_lib.STATE_FILE), 'rb') as f:
    leaves = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(
        serialization.msgpack_restore(f.read()))]
  assert all(np.all(np.isfinite(leaf)) for leaf in leaves if leaf.dtype.kind == 'f')
  assert max(float(np.abs(leaf).max()) for leaf in leaves if leaf.dtype.kind == 'f') > 1e20
