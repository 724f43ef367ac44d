"""The launch CLI's config checks (subprocess) and the cluster program object."""

import os
import subprocess
import sys

import pytest

import s3ta  # noqa: F401

import launcher_runs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli(module, config, workdir, *args, timeout=120):
  env = dict(os.environ, JAX_PLATFORMS='cpu')
  return subprocess.run([sys.executable, '-m', module, f'--config={config}', f'--workdir={workdir}',
                         *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def _train(workdir, *args):
  return _cli('launch.train', 'experiments/smoke.py', workdir, *args)


def _train_single(workdir, *args):
  return _cli('launch.train_single', 'experiments/catch.py', workdir, *args)


BAD_CONFIGS = [
    ('--config.env.game=NotAGame', "Unknown Atari game 'NotAGame' for backend 'envpool'; valid games"),
    ('--config.env.backend=gym', "Unknown config.env.backend 'gym'; valid: ('envpool', 'ale')"),
    ('--config.num_actors=0', 'config.num_actors must be an integer >= 1, got 0'),
    ('--config.unroll_length=0', 'config.unroll_length must be an integer >= 1, got 0'),
    ('--config.batch_size=0', 'config.batch_size must be an integer >= 1, got 0'),
    ('--config.nonsense=3', 'unknown config key config.nonsense; valid keys of config: '),
    ('--config.learner.entropy=0.1',
     'unknown config key config.learner.entropy (did you mean config.learner.entropy_cost?)'),
    ('--config.num_actors=two', "flag --config.num_actors=two: invalid literal for int()"),
    ('--config.inference.mode=gpu',
     "config.inference.mode must be one of ('auto', 'actor', 'central'), got 'gpu'"),
    ('--config.max_seconds=nan', 'config.max_seconds must be a number, got nan'),
    ('--terminal=xterm', 'flag --terminal=xterm: value should be one of <output_to_files|current_terminal>'),
    ('--startup_grace_s=-1', '--startup_grace_s must be a number of seconds > 0, got -1.0'),
]
VERTEX_BAD = [
    ('/tmp/s3ta-local-run', None, "--workdir='/tmp/s3ta-local-run' is a local path; a Vertex AI run "
     'needs storage that every node reaches'),
    ('gs://b/r', '--config.resources.learner_accelerator=k80',
     "config.resources accelerator 'k80' of 'learner' is not an accelerator xmanager knows; valid: "),
]
REMOTE_WORKDIR = 'gs://s3ta-test-bucket/run'


def _vertex_args(*args):
  return ['--config=experiments/atari_expert.py', '--launch_type=vertex_ai', '--dry_run', *args]


@pytest.fixture(scope='module')
def train_runs(tmp_path_factory):
  """`launch.train` on every command line below but BAD_CONFIGS[0], in one process (launcher_runs).

  Keyed by a short name; BAD_CONFIGS[0] runs as `python -m launch.train` in its test.
  """
  root = tmp_path_factory.mktemp('launch_train')
  lines = {override: ['--config=experiments/smoke.py', f'--workdir={root}/{i}', override]
           for i, (override, _) in enumerate(BAD_CONFIGS) if i}
  lines.update({('vertex', workdir): _vertex_args(f'--workdir={workdir}', *([override] if override else []))
                for workdir, override, _ in VERTEX_BAD})
  lines['remote'] = ['--config=experiments/smoke.py', f'--workdir={REMOTE_WORKDIR}']
  lines['vertex_dry_run'] = _vertex_args('--workdir=gs://s3ta-test-bucket/run', '--config.num_actors=3')
  results = launcher_runs.run_each('launch.train', list(lines.values()),
                                   env=dict(os.environ, JAX_PLATFORMS='cpu'))
  return dict(zip(lines, results)), root


@pytest.mark.parametrize('case', range(len(BAD_CONFIGS)), ids=[o for o, _ in BAD_CONFIGS])
def test_bad_config_exits_nonzero_with_one_clear_error(tmp_path, train_runs, case):
  override, message = BAD_CONFIGS[case]
  if case == 0:
    result, workdir = _train(tmp_path, override), tmp_path
  else:
    result, workdir = train_runs[0][override], train_runs[1] / str(case)
  assert result.returncode == 2, result.stderr[-2000:]
  errors = [line for line in result.stderr.splitlines() if line.startswith('error:')]
  assert len(errors) == 1 and message in errors[0], result.stderr[-2000:]
  assert 'Pong' in errors[0] or 'game' not in override  # lists the valid names
  assert not os.path.exists(os.path.join(workdir, 'logs'))  # nothing was launched


@pytest.mark.parametrize('source, refused', [
    ('def get_config():\n  return None\n', False),
    ('from experiments.catch import get_config\n', False),
    ('from experiments.catch import get_config as get_config\n', False),
    ('import ml_collections\nget_config = lambda: ml_collections.ConfigDict()\n', False),
    ('from typing import Callable\nget_config: Callable = print\n', False),
    ('try:\n  from experiments.catch import get_config\nexcept ImportError:\n  raise\n', False),
    ('if True:\n  def get_config():\n    return None\n', False),
    ('def make_config():\n  return None\n', True),
    ('from experiments.catch import get_config as make\n', True),
    ('def other():\n  get_config = 1\n', True),
    ('class Configs:\n  def get_config(self):\n    return None\n', True),
    ('make = lambda get_config=None: get_config\n', True),
], ids=['def', 'import', 'import_as', 'assign', 'annotated', 'in_try', 'in_if', 'other_name',
        'renamed', 'in_function', 'in_class', 'lambda_argument'])
def test_config_file_check_accepts_any_top_level_get_config(tmp_path, source, refused):
  """A config may define, import or assign get_config, also inside an if or try block; one that
  binds it nowhere in the module's own scope (only inside a function or class, or not at all)
  gets the one-line refusal before absl runs it."""
  from launch import cli  # pylint: disable=import-outside-toplevel
  path = tmp_path / 'config.py'
  path.write_text(source)
  problem = cli.config_file_problem(['prog', f'--config={path}:arg'])
  if refused:
    assert problem == (f'--config file {str(path)!r} defines no get_config(); '
                       'see experiments/ for examples.')
  else:
    assert problem is None


def test_validate_config_rejects_more_bad_values():
  from experiments import atari_expert, smoke  # pylint: disable=g-import-not-at-top
  from launch import config_checks  # pylint: disable=g-import-not-at-top
  config_checks.validate_distributed(smoke.get_config(''))
  cases = {
      'queue_size': (2, 'queue_size'), 'max_frames': (-1, 'max_frames'),
      'param_refresh_steps': (0, 'param_refresh_steps'),
      'sampler_in_flight_samples': (-1, r'sampler_in_flight_samples must be an int >= 0 \(0: twice'),
  }
  for field, (value, needle) in cases.items():
    config = smoke.get_config('')
    config[field] = value
    with pytest.raises(ValueError, match=needle):
      config_checks.validate_distributed(config)
  inference_cases = {
      'num_nodes': (0, 'num_nodes must be an integer >= 1 .central inference needs a node'),
      'max_requests': (-1, 'max_requests must be an integer >= 0'),
      'wait_ms': (-1.0, r'wait_ms must be in \[0, 1000\]'), 'timeout_s': (0.0, 'timeout_s must be > 0'),
  }
  for field, (value, needle) in inference_cases.items():
    config = smoke.get_config('')
    config.inference[field] = value
    with pytest.raises(ValueError, match=needle):
      config_checks.validate_distributed(config)
  config = smoke.get_config('')
  config.inference.colocated, config.inference.num_nodes = True, 2
  with pytest.raises(ValueError, match='colocated serves inference from the learner process'):
    config_checks.validate_distributed(config)
  config = smoke.get_config('')
  config.inference.num_nodes = 3  # 2 actors
  with pytest.raises(ValueError, match=r'num_nodes \(3\) must be <= config.num_actors \(2\)'):
    config_checks.validate_distributed(config)
  config = smoke.get_config('')
  config.network.kind = 'transformer'
  with pytest.raises(ValueError, match='Unknown network kind'):
    config_checks.validate_distributed(config)
  config = smoke.get_config('')
  config.max_frames = config.max_seconds = config.max_learner_steps = 0
  with pytest.raises(ValueError, match='never ends'):
    config_checks.validate_distributed(config)
  with pytest.raises(ValueError, match='Unknown atari_expert variant'):
    atari_expert.get_config('gpu-huge')


def _flat(config, prefix=''):
  """A ConfigDict as {'section.field': value}."""
  out = {}
  for key, value in config.items():
    if hasattr(value, 'items'):
      out.update(_flat(value, f'{prefix}{key}.'))
    else:
      out[prefix + key] = value
  return out


def test_tuned_variant_is_the_paper_agent_plus_the_pong_start_recipe():
  """'tuned' changes exactly the six settings of the one S3TA run that left Pong's random level."""
  from experiments import atari_expert  # pylint: disable=g-import-not-at-top
  from s3ta.learning.learner_core import LearnerConfig  # pylint: disable=g-import-not-at-top
  from s3ta.networks.agent import NetworkConfig  # pylint: disable=g-import-not-at-top

  paper, tuned = _flat(atari_expert.get_config('')), _flat(atari_expert.get_config('tuned'))
  assert set(paper) == set(tuned)
  assert {k: tuned[k] for k in tuned if tuned[k] != paper[k]} == {
      'network.subtract_background': True, 'network.key_norm': True, 'network.key_channels': 32,
      'learner.rmsprop_epsilon': 1e-4, 'learner.rmsprop_initial_scale': 0.0,
      'learner.value_offset_step_size': 0.1}
  config = atari_expert.get_config('tuned')
  assert NetworkConfig.from_dict(config.network).key_channels == 32
  assert LearnerConfig.from_dict(config.learner).value_offset_step_size == 0.1


def test_tuned_fast_variant_is_tuned_with_the_fast_optimizer_and_its_anneal():
  """'tuned_fast': 'tuned' plus atari_fast.py's batch, rate, clip and 10 M-frame anneal."""
  from experiments import atari_expert, atari_fast  # pylint: disable=g-import-not-at-top
  tuned, fast = _flat(atari_expert.get_config('tuned')), _flat(atari_expert.get_config('tuned_fast'))
  assert {k: fast[k] for k in fast if fast[k] != tuned[k]} == {
      'batch_size': 8, 'unroll_length': 20, 'learner.learning_rate': 6e-4,
      'learner.grad_clip': 40.0, 'learner.grad_clip_mode': 'global_norm',
      'max_frames': 10_000_000, 'learner.learning_rate_decay_steps': 15_625,  # 1e7 / (4 * 8 * 20)
      'single_machine.num_envs': 128}
  small_s3ta = _flat(atari_fast.get_config('s3ta'))
  for key in ('batch_size', 'unroll_length', 'learner.learning_rate', 'learner.grad_clip',
              'learner.grad_clip_mode', 'learner.rmsprop_epsilon', 'learner.rmsprop_initial_scale',
              'learner.learning_rate_decay_steps', 'max_frames'):
    assert fast[key] == small_s3ta[key], key  # the recipe that held +15 on 2 CPU cores
  config = atari_expert.get_config('tuned_fast')
  config.max_frames = 5_000_000  # the anneal ends with the run
  assert config.learner.learning_rate_decay_steps == 7_813


def test_resnet_fast_variant_is_the_paper_baseline_with_the_fast_batch_and_anneal():
  """'resnet_fast': the paper's config with kind resnet_lstm and tuned_fast's batch and anneal,
  so the paper's RMSProp state (the one it learned with) and no value offset; 5,055,815
  parameters, as printed by the H200 run that learned (BENCHMARKS.md)."""
  from experiments import atari_expert  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  from s3ta.networks import agent  # pylint: disable=g-import-not-at-top
  paper, tuned = _flat(atari_expert.get_config('')), _flat(atari_expert.get_config('tuned'))
  tuned_fast = _flat(atari_expert.get_config('tuned_fast'))
  resnet = _flat(atari_expert.get_config('resnet_fast'))
  fast_keys = {k for k in tuned_fast if tuned_fast[k] != tuned[k]}
  assert {k: resnet[k] for k in resnet if resnet[k] != paper[k]} == {
      'network.kind': 'resnet_lstm', **{k: tuned_fast[k] for k in fast_keys}}
  assert (resnet['learner.rmsprop_epsilon'], resnet['learner.rmsprop_initial_scale'],
          resnet['learner.value_offset_step_size']) == (0.01, 1.0, 0.0)
  network = agent.make_network(atari_expert.get_config('resnet_fast').network, 6, (210, 160, 3))
  params = jax.eval_shape(network.init, jax.random.PRNGKey(0))
  assert agent.parameter_counts(params) == {'inference': 5_054_016, 'policy': 1_542, 'value': 257}


def test_fast_s3ta_variant_is_the_lstm_baseline_with_a_small_s3ta():
  """atari_fast.py:s3ta: the LSTM baseline with a small S3TA, the value offset, an lr anneal and
  RMSProp's mean square from 0 (its measured start)."""
  from experiments import atari_fast  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  from s3ta.networks import agent  # pylint: disable=g-import-not-at-top
  lstm, small = _flat(atari_fast.get_config('lstm')), _flat(atari_fast.get_config('s3ta'))
  assert set(lstm) == set(small)
  assert {k: small[k] for k in small if small[k] != lstm[k]} == {
      'network.kind': 's3ta', 'network.vision_lstm_channels': 32, 'network.key_channels': 16,
      'network.subtract_background': True, 'network.key_norm': True,
      'learner.value_offset_step_size': 0.1, 'max_frames': 10_000_000, 'max_seconds': 10_800.0,
      'learner.learning_rate_decay_steps': 15_625,  # 10 M frames / (4 x B 8 x T 20)
      'learner.rmsprop_initial_scale': 0.0}  # the S3TA runs' start; the baselines start from 1.0
  network_config = agent.NetworkConfig.from_dict(atari_fast.get_config('s3ta').network)
  assert network_config.vision_shape((84, 84, 1)) == (11, 11)  # 84 -> 21 -> 11 locations
  params = agent.make_network(network_config, 6, (84, 84, 1)).init(jax.random.PRNGKey(0))
  # 3 x 3 x 32 hidden channels -> 4 gates x 32; the BENCHMARKS run printed the same total
  assert params['core']['vision_lstm']['hidden_to_gates']['kernel'].shape == (288, 128)
  assert agent.parameter_count(params) == 1_307_847
  with pytest.raises(ValueError, match="Unknown atari_fast variant 'gpu'"):
    atari_fast.get_config('gpu')


def test_fast_s3ta_anneal_ends_at_max_frames_and_yields_to_an_explicit_value():
  """The s3ta variant's learning rate reaches 0 at max_frames, through overrides of either."""
  from experiments import atari_fast  # pylint: disable=g-import-not-at-top
  from s3ta.learning.learner_core import LearnerConfig  # pylint: disable=g-import-not-at-top
  config = atari_fast.get_config('s3ta')
  config.max_frames, config.batch_size = 6_400_000, 16  # 6.4 M / (4 x 16 x 20) = 5,000 steps
  assert LearnerConfig.from_dict(config.learner).learning_rate_decay_steps == 5_000
  config.max_frames = 6_400_001  # a partial last step still counts: the anneal never ends early
  assert config.learner.learning_rate_decay_steps == 5_001
  config.learner.learning_rate_decay_steps = 0  # an explicit value wins (constant rate)
  assert config.learner.learning_rate_decay_steps == 0 and config.max_frames == 6_400_001


def test_cluster_program_and_resources_are_valid():
  """Builds (cannot launch here) the Vertex AI program: groups match per-node resources."""
  from experiments import atari_expert  # pylint: disable=g-import-not-at-top
  from launch import program as program_lib  # pylint: disable=g-import-not-at-top
  config = atari_expert.get_config('')
  config.num_actors = 3
  config.inference.mode = 'actor'
  program = program_lib.make_program(config, '/tmp/s3ta_cluster_program_test')
  groups = {label: len(nodes) for label, nodes in program.groups.items()}
  assert groups == {'replay': 1, 'learner': 1, 'actor': 3, 'evaluator': 1}
  spec = program_lib.resource_spec(config)
  assert set(spec) == set(groups)
  assert spec['learner']['accelerator'] == config.resources.learner_accelerator
  assert spec['learner']['accelerator_count'] == 1
  assert 'accelerator' not in spec['actor'] and spec['actor']['cpu'] == config.resources.actor_cpu
  local = program_lib.local_resources(config)
  assert local['actor'].env['JAX_PLATFORMS'] == 'cpu' and 'JAX_PLATFORMS' not in local['learner'].env
  assert local['inference'].env['XLA_PYTHON_CLIENT_PREALLOCATE'] == 'false'  # shares the GPU
  # 'auto' on the cluster: the learner has an accelerator, so the actors use central inference.
  config.inference.mode, config.inference.num_nodes = 'auto', 2
  central = program_lib.make_program(config, '/tmp/s3ta_cluster_program_test', local=False)
  assert {label: len(nodes) for label, nodes in central.groups.items()}['inference'] == 2
  spec = program_lib.resource_spec(config)
  assert spec['inference']['accelerator'] == config.resources.learner_accelerator
  assert spec['inference']['accelerator_count'] == 1
  config.resources.learner_accelerator = ''
  assert program_lib.inference_mode(config, local=False) == 'actor'
  assert 'inference' not in program_lib.resource_spec(config)
  resources = program_lib.xm_resources(config, REPO, os.path.join(REPO, 'requirements.txt'))
  assert set(resources) == set(groups)


def test_vertex_ai_dry_run_prints_the_whole_job_and_submits_nothing(train_runs):
  result = train_runs[0]['vertex_dry_run']
  assert result.returncode == 0, result.stderr[-2000:]
  out = result.stdout
  assert 'dry run: nothing was built or submitted' in out
  # Launchpad's grouping: replay, learner (A100), central inference (A100), then the CPU
  # workers (3 actors + the evaluator share one pool: same image and resources).
  pools = [line for line in out.splitlines() if line.startswith('worker pool ')]
  assert len(pools) == 4, out
  assert pools[0].endswith('1 replica(s), cpu 8, memory 32 GiB')
  assert pools[1].endswith('1 replica(s), a100 1, cpu 8, memory 64 GiB')
  assert pools[2].endswith('1 replica(s), a100 1, cpu 8, memory 32 GiB')
  assert pools[3].endswith('4 replica(s), cpu 4, memory 8 GiB')
  images = [line for line in out.splitlines() if line.strip().startswith('image: FROM python:3.10')]
  assert len(images) == 4
  assert ['jax[cuda12]' in line for line in images] == [False, True, True, False]
  assert out.count('command: python -m process_entry --data_file=job.pkl') == 4
  for mapping in ('replay-0 -> workerpool0-0', 'learner-0 -> workerpool1-0',
                  'inference-0 -> workerpool2-0', 'actor-[0:3] -> workerpool3-[0:3]',
                  'evaluator-0 -> workerpool3-3'):
    assert mapping in out
  assert 'launched successfully' not in out


@pytest.mark.parametrize('workdir, override, message', VERTEX_BAD)
def test_vertex_ai_bad_workdir_or_accelerator_is_one_line_exit_2(train_runs, workdir, override, message):
  result = train_runs[0][('vertex', workdir)]
  assert result.returncode == 2
  assert _one_error(result).startswith(f'error: {message}')


def _write_checkpoints(workdir):
  """A corrupt newest checkpoint (truncated JSON, garbage state) over a good older one."""
  from s3ta.utils import checkpoint  # pylint: disable=g-import-not-at-top
  directory = checkpoint.checkpoint_dir(str(workdir))
  checkpoint.save(directory, 3, {'w': [1.0, 2.0]}, network_config={'kind': 'other'})
  corrupt = os.path.join(directory, 'ckpt_5')
  os.makedirs(corrupt)
  for name, data in (('metadata.json', b'{"format": 3, "leaves": {'), ('state.msgpack', b'\x00\x01')):
    with open(os.path.join(corrupt, name), 'wb') as f:
      f.write(data)
  return directory


def _snapshot(directory):
  return {os.path.join(root, name): open(os.path.join(root, name), 'rb').read()
          for root, _, names in os.walk(directory) for name in names}


def _one_error(result) -> str:
  errors = [line for line in result.stderr.splitlines() if line.startswith('error:')]
  assert result.returncode == 2 and len(errors) == 1, result.stderr[-2000:]
  return errors[0]


def test_distributed_launcher_refuses_a_corrupt_checkpoint_before_launching(tmp_path):
  directory = _write_checkpoints(tmp_path)
  before = _snapshot(directory)
  assert 'ckpt_5 is corrupt (JSONDecodeError' in _one_error(_train(tmp_path))
  assert _snapshot(directory) == before and not os.path.exists(tmp_path / 'logs')


def test_unwritable_workdir_and_bad_checkpoints_are_one_line_exit_2(tmp_path):
  """launch.train_single; launch.train runs the same `cli.check_workdir` (test above).

  The first two run in one process (tests/launcher_runs.py), the third as `python -m`.
  """
  (tmp_path / 'a_file').write_text('not a directory')
  workdir = tmp_path / 'run'
  directory = _write_checkpoints(workdir)
  before = _snapshot(directory)
  not_a_directory, corrupt = launcher_runs.run_each(
      'launch.train_single', [['--config=experiments/catch.py', f'--workdir={w}']
                              for w in (tmp_path / 'a_file' / 'run', workdir)],
      env=dict(os.environ, JAX_PLATFORMS='cpu'))
  assert 'is not a writable directory (Not a directory)' in _one_error(not_a_directory)
  error = _one_error(corrupt)
  assert f'Checkpoint {directory}/ckpt_5 is corrupt (JSONDecodeError' in error
  assert 'move it out of the checkpoints directory' in error
  assert _snapshot(directory) == before  # nothing overwritten or removed

  os.rename(os.path.join(directory, 'ckpt_5'), tmp_path / 'ckpt_5')  # as the error suggests
  error = _one_error(_train_single(workdir))  # ckpt_3 decodes, but is another network's
  assert 'ckpt_3 does not fit the requested state: network config differs: ' in error
  assert "kind: checkpoint 'other' vs requested 's3ta'" in error
  assert '(to resume it as saved: --config.network.kind=other)' in error
  assert _snapshot(directory) == {k: v for k, v in before.items() if '/ckpt_5/' not in k}
  assert not os.path.exists(workdir / 'logs') and not os.path.exists(workdir / 'metrics.jsonl')


@pytest.mark.parametrize('module, config, launcher', [
    ('launch.train', 'experiments/smoke.py', 'launch.train --launch_type=local_mp'),
    ('launch.train_single', 'experiments/catch.py', 'launch.train_single'),
])
def test_local_launchers_refuse_a_remote_workdir_in_one_line(train_runs, module, config, launcher):
  if module == 'launch.train':
    result = train_runs[0]['remote']
  else:
    result = _cli(module, config, REMOTE_WORKDIR)
  assert _one_error(result).startswith(
      f"error: {launcher} runs on this machine and needs a local --workdir, got "
      "'gs://s3ta-test-bucket/run'")


@pytest.mark.parametrize('name, arg', [('atari_expert', ''), ('atari_expert', 'cpu'),
                                       ('atari_expert', 'tuned_fast'), ('atari_fast', ''),
                                       ('atari_fast', 's3ta'), ('smoke', ''), ('catch', ''),
                                       ('catch', 'resnet_lstm'), ('ram_features', 'Pong,32'),
                                       ('tmaze', 'attention')])
def test_every_experiment_config_passes_the_distributed_checks(name, arg):
  """The configs say `launch.train` runs them; Catch's once lacked three fields (a traceback)."""
  import importlib  # pylint: disable=g-import-not-at-top
  from launch import config_checks  # pylint: disable=g-import-not-at-top
  module = importlib.import_module(f'experiments.{name}')
  config = module.get_config(arg) if arg else module.get_config()
  config_checks.validate_distributed(config)
  del config['metrics_every_steps']
  with pytest.raises(ValueError, match="^the config has no field 'metrics_every_steps', which the "
                                       'distributed program reads'):
    config_checks.validate_distributed(config)
