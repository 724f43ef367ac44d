"""Loading an agent and playing it on Atari while recording what the analysis needs.

Side-effecting glue between the network (s3ta/networks), the Atari environment
(s3ta/envs/atari.py) and checkpoints (s3ta/utils/checkpoint.py); the numerics live
in numerics.py and the pictures in render.py.

Per step the recorder keeps the frame the agent saw, the action, logits, value and,
for attention agents, the attention maps, the queries and the keys. The keys are
not an output of the network, but they need no hook: the ConvLSTM cell's output is
its new hidden state, so keys = next_state.vision[1][..., :key_channels] (checked
against the network's own attention in tests/test_analysis_rollout.py).
"""

import dataclasses
import functools
import json
import os
import sys
from typing import Any, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from s3ta.acting.actor_core import agent_input
from s3ta.envs.base import EnvStep
from s3ta.envs import atari, factory  # both import EnvPool/ALE lazily, when an env is built
from s3ta.learning import learner_core, ppo
from s3ta.networks import AgentInput, Network, NetworkConfig, make_network
from s3ta.networks import attention as attention_lib
from s3ta.utils import checkpoint as checkpoint_lib

ATARI_OBSERVATION_SHAPE = (210, 160, 3)

# A small S3TA network for CPU smoke runs and tests (paper kernels/strides, so the
# attention grid is the paper's 27x20; fewer channels and units).
SMALL_NETWORK = dict(conv_channels=(16, 32), vision_lstm_channels=32, key_channels=8, num_heads=4,
                     query_hidden=(64,), answer_hidden=(128,), lstm_size=64, head_hidden=32)

# ALE minimal action sets of a few games, for labels (EnvPool does not expose them).
ACTION_NAMES = {
    'pong': ('NOOP', 'FIRE', 'RIGHT', 'LEFT', 'RIGHTFIRE', 'LEFTFIRE'),
    'breakout': ('NOOP', 'FIRE', 'RIGHT', 'LEFT'),
    'spaceinvaders': ('NOOP', 'FIRE', 'RIGHT', 'LEFT', 'RIGHTFIRE', 'LEFTFIRE'),
    'mspacman': ('NOOP', 'UP', 'RIGHT', 'LEFT', 'DOWN', 'UPRIGHT', 'UPLEFT', 'DOWNRIGHT', 'DOWNLEFT'),
}


def log(message: str) -> None:
  """Progress and result lines go to stderr, unbuffered, so long runs show progress."""
  print(message, file=sys.stderr, flush=True)


def action_name(game: str, action: int) -> str:
  names = ACTION_NAMES.get(game.lower().replace('_', '').replace('-', ''))
  return names[action] if names is not None and 0 <= action < len(names) else f'a{action}'


# ----------------------------------------------------------------------------------------------
# Environments
# ----------------------------------------------------------------------------------------------


class EnvSettings(NamedTuple):
  """How to build the environment: from --game, or as the checkpoint's run was trained."""
  game: str
  light_observation: bool = False  # gray 84x84x1 frames (the 'cpu'/'smoke' experiment variants)
  full_action_space: bool = False
  trained_game: Optional[str] = None  # the game in the checkpoint's experiment config, if any
  frame_skip: int = 4  # action repeat
  noop_max: int = 30  # up to this many no-ops at episode start
  backend: str = 'envpool'  # Atari backend ('envpool' or 'ale', s3ta/envs/factory.py)
  frame_stack: int = 1  # frames stacked along channels


def find_checkpoint(directory: str) -> str:
  """The newest `ckpt_<step>` in `directory` (a ckpt dir, a checkpoints dir, or a workdir)."""
  if not os.path.isdir(directory):
    raise FileNotFoundError(f'checkpoint directory {directory!r} does not exist.')
  if os.path.isfile(os.path.join(directory, checkpoint_lib.METADATA_FILE)):
    return directory
  path = (checkpoint_lib.latest_checkpoint(directory)
          or checkpoint_lib.latest_checkpoint(checkpoint_lib.checkpoint_dir(directory)))
  if path is None:
    raise FileNotFoundError(f'no checkpoint ({checkpoint_lib.PREFIX}<step>/) in {directory!r} '
                            'or its checkpoints/ subdirectory.')
  return path


def read_metadata(path: str) -> dict:
  """The metadata of checkpoint `path`; ValueError naming it when the file does not decode."""
  with open(os.path.join(path, checkpoint_lib.METADATA_FILE)) as f:
    try:
      return json.load(f)
    except ValueError as e:
      raise ValueError(f'Checkpoint {path} is corrupt ({checkpoint_lib.METADATA_FILE}: {e}); move it '
                       'out of its checkpoints directory to use the one before it.') from None


def trained_env_config(checkpoint: str) -> dict:
  """`config.env` of the experiment the newest checkpoint under `checkpoint` was trained with
  ({} when its metadata holds no experiment config)."""
  config = read_metadata(find_checkpoint(checkpoint)).get('config') or {}
  return (config.get('env') if isinstance(config, dict) else None) or {}


def env_settings(checkpoint: Optional[str], game: Optional[str]) -> EnvSettings:
  """Environment settings: the checkpoint's experiment config (`config.env`) when it has one.

  `game` overrides the trained game (None: the trained game, else Pong); the
  observation type (RGB or gray 84x84) and action set always follow the checkpoint,
  since the network only understands those.
  """
  env_config = trained_env_config(checkpoint) if checkpoint is not None else {}
  if factory.env_name(env_config) != 'atari':
    raise ValueError(f'the analysis tools play Atari; this checkpoint was trained on '
                     f'{factory.env_name(env_config)!r}.')
  backend = factory.backend(env_config)
  trained = env_config.get('game')
  chosen = game or trained or 'Pong'
  return EnvSettings(atari.validate_game(chosen, backend),
                     bool(env_config.get('light_observation', False)),
                     bool(env_config.get('full_action_space', False)),
                     atari.validate_game(trained, backend) if trained else None,
                     int(env_config.get('frame_skip', atari.FRAME_SKIP)),
                     int(env_config.get('noop_max', 30)), backend, factory.frame_stack(env_config))


def observation_shape(settings: EnvSettings) -> tuple[int, int, int]:
  return atari.observation_shape(settings.light_observation, settings.frame_stack)


def make_env(settings, num_envs: int = 1, seed: int = 0):
  """The Atari batch of `settings` (s3ta/envs/factory.py: action repeat 4, unclipped rewards).

  `settings` is an EnvSettings or a game name (RGB 210x160 frames). Raises
  ValueError (one line) for an unknown game.
  """
  if isinstance(settings, str):
    settings = EnvSettings(settings)
  return factory.make_env({'name': 'atari', **settings._asdict()}, num_envs, seed)


def area_resize_matrix(source: int, target: int) -> np.ndarray:
  """[target, source] weights of an area (box) resize along one axis: each output pixel is
  the mean of the source interval it covers, fractional pixels weighted by their overlap."""
  edges = np.arange(target + 1) * source / target
  lower, upper = edges[:-1, None], edges[1:, None]
  pixels = np.arange(source)[None, :]
  overlap = np.clip(np.minimum(upper, pixels + 1) - np.maximum(lower, pixels), 0.0, None)
  return overlap / (source / target)


def gray_84(frame: np.ndarray) -> np.ndarray:
  """An RGB [H, W, 3] frame as the gray 84x84 observations show it: ITU-R 601 luma, area
  resize (float; within a few levels of the emulator pipeline's own uint8 frame)."""
  luma = np.asarray(frame, np.float64) @ np.array([0.299, 0.587, 0.114])
  height, width = atari.LIGHT_SHAPE[:2]
  return (area_resize_matrix(luma.shape[0], height) @ luma
          @ area_resize_matrix(luma.shape[1], width).T)


class RGBTwin:
  """The RGB 210x160 frames of a gray-84x84 agent's game, from a second environment.

  Tools that find objects by colour need RGB frames, which a gray agent's environment does
  not show. ALE with the same seed, no sticky actions and the same actions plays the same
  game, so a twin built like the agent's environment (RGB, one frame, same seed) follows
  it. `follow` checks each step: a twin whose frame, made gray 84x84, differs from the
  agent's observation in more than `MAX_DIFFERENT_PIXELS` pixels (by > 40 levels) raises,
  rather than give another game's object boxes. Measured on Pong with random actions: 0
  such pixels in 400 steps when in step; a twin with another seed is caught within 8-11 steps.
  """
  MAX_DIFFERENT_PIXELS = 4

  def __init__(self, settings: EnvSettings, seed: int):
    if not settings.light_observation:
      raise ValueError('RGBTwin follows a gray 84x84 environment; this one is already RGB.')
    self.env = make_env(settings._replace(light_observation=False, frame_stack=1), 1, seed)
    self._step = self.env.reset()
    self.steps = 0

  def follow(self, observation: np.ndarray, action: int) -> np.ndarray:
    """The RGB frame of the step whose gray 84x84 `observation` [84, 84] the agent saw
    (checked), then steps the twin with the agent's `action`."""
    frame = np.asarray(self._step.observation[0])
    different = int(np.sum(np.abs(gray_84(frame) - np.asarray(observation, np.float64)) > 40))
    if different > self.MAX_DIFFERENT_PIXELS:
      raise RuntimeError(f'the RGB twin left the agent\'s game at step {self.steps} '
                         f'({different} gray pixels differ by > 40 levels; allowed '
                         f'{self.MAX_DIFFERENT_PIXELS}): the backend is not deterministic here.')
    self._step = self.env.step(np.array([action], np.int32))
    self.steps += 1
    return frame

  def close(self) -> None:
    self.env.close()


# ----------------------------------------------------------------------------------------------
# Agents
# ----------------------------------------------------------------------------------------------


@dataclasses.dataclass
class LoadedAgent:
  network: Network
  params: Any
  description: str  # where the parameters came from, printed with every output
  value_offset: float = 0.0  # the learner's value offset, added to the network's values


def load_agent(checkpoint: Optional[str], num_actions: int, network_size: str = 'small',
               seed: int = 0, observation_shape: Sequence[int] = ATARI_OBSERVATION_SHAPE) -> LoadedAgent:
  """Restores the newest checkpoint under `checkpoint`, or builds a randomly initialised agent.

  Raises:
    ValueError / FileNotFoundError with a one-line message for a missing directory,
    a directory without checkpoints, or a checkpoint of another network.
  """
  if checkpoint is None:
    if network_size not in ('small', 'paper'):
      raise ValueError(f"--network must be 'small' or 'paper', got {network_size!r}.")
    config = NetworkConfig(**SMALL_NETWORK) if network_size == 'small' else NetworkConfig()
    network = make_network(config, num_actions, observation_shape)
    params = random_params(network, seed)
    return LoadedAgent(network, params,
                       f'RANDOMLY INITIALISED {network_size} network (no --checkpoint given; seed {seed})')
  return _restore_agent(find_checkpoint(checkpoint), num_actions, observation_shape)


def random_params(network: Network, seed: int = 0):
  """Random parameters with the network's structure, drawn in NumPy (no XLA compile).

  `network.init` costs 5-10 s of XLA compilation on a small CPU; for analysis runs
  without a checkpoint any random network will do: LeCun-normal kernels (Flax's
  default scale), zero biases, unit-normal fixed queries.
  """
  shapes = jax.eval_shape(network.init, jax.random.PRNGKey(0))
  rng = np.random.default_rng(seed)

  def draw(path, leaf):
    name = getattr(path[-1], 'key', str(path[-1]))
    shape = leaf.shape
    if name == 'fixed_queries':
      return jnp.asarray(rng.standard_normal(shape), leaf.dtype)
    if len(shape) < 2:
      return jnp.zeros(shape, leaf.dtype)
    fan_in = int(np.prod(shape[:-1]))
    return jnp.asarray(rng.standard_normal(shape) / np.sqrt(fan_in), leaf.dtype)

  return jax.tree_util.tree_map_with_path(draw, shapes)


def training_state_template(network: Network, experiment: dict):
  """A fresh training state of the run's algorithm (its optimizer state's structure):
  PPO's when the single-machine trainer ran PPO, IMPALA's otherwise."""
  key = jax.random.PRNGKey(0)
  if (experiment.get('single_machine') or {}).get('algorithm') == 'ppo':
    return ppo.init_training_state(network, ppo.PPOConfig.from_dict(experiment.get('ppo') or {}),
                                   key)
  learner_config = learner_core.LearnerConfig.from_dict(experiment.get('learner') or {})
  return learner_core.init_training_state(network, learner_config, key)


def restore_agent(path: str, num_actions: int, observation_shape: Sequence[int]) -> LoadedAgent:
  """The agent of the newest checkpoint under `path` (any environment; see `_restore_agent`)."""
  return _restore_agent(find_checkpoint(path), num_actions, observation_shape)


def _restore_agent(path: str, num_actions: int, observation_shape: Sequence[int]) -> LoadedAgent:
  """Params of the checkpoint at `path` (s3ta/utils/checkpoint.py).

  The network is rebuilt from the network config stored in the checkpoint's
  metadata; the checkpoint is restored into a TrainingState template, so any leaf
  that does not fit (another network, another game's action count) fails with
  checkpoint.restore's ValueError.
  """
  metadata = read_metadata(path)
  if not metadata.get('network_config'):
    raise ValueError(f'checkpoint {path} has no network config in its metadata; cannot rebuild the network.')
  config = NetworkConfig.from_dict(metadata['network_config'])
  network = make_network(config, num_actions, observation_shape)
  experiment = metadata.get('config') if isinstance(metadata.get('config'), dict) else {}
  template = jax.eval_shape(lambda: training_state_template(network, experiment))
  restored = checkpoint_lib.restore(path, template, network_config=metadata["network_config"])
  params = jax.tree_util.tree_map(jnp.asarray, restored.state.params)
  offset = restored.state.value_offset  # None unless the learner had `value_offset_step_size`
  return LoadedAgent(network, params, f'checkpoint {path} (step {restored.step}, {config.kind} network)',
                     0.0 if offset is None else float(offset))


# ----------------------------------------------------------------------------------------------
# Stepping and recording
# ----------------------------------------------------------------------------------------------


class StepRecord(NamedTuple):
  """What one agent step produced, for environment 0 (NumPy)."""
  frame: np.ndarray  # uint8 [H, W, 3], the observation the agent saw (after any injection)
  action: int
  logits: np.ndarray  # [A]
  value: float
  reward: float  # reward that came with this observation
  is_first: bool
  attention: Optional[np.ndarray]  # [N, h, w] or None (ResNet baselines)
  queries: Optional[np.ndarray]  # [N, C_k + C_s]
  keys: Optional[np.ndarray]  # [h, w, C_k]


@functools.lru_cache(maxsize=8)
def _compiled_functions(config: NetworkConfig, num_actions: int, observation_shape: tuple,
                        greedy: bool):
  """Jitted (policy_step, evaluate) per network, shared by runners so each compiles once."""
  network = make_network(config, num_actions, observation_shape)
  key_channels, has_attention = config.key_channels, network.has_attention

  def policy_step(params, rng, inputs, state, threshold):
    outputs, next_state = network.step(params, inputs, state, threshold)
    if greedy:
      action = jnp.argmax(outputs.logits, axis=-1)
    else:
      action = jax.random.categorical(rng, outputs.logits)
    # The ConvLSTM's output is its new hidden state; its first channels are the keys.
    keys = next_state.vision[1][..., :key_channels] if has_attention else None
    return action.astype(jnp.int32), outputs, keys, next_state

  def evaluate(params, inputs, state, threshold):
    outputs, _ = network.step(params, inputs, state, threshold)
    return outputs.logits, outputs.value

  return jax.jit(policy_step), jax.jit(evaluate)


class AgentRunner:
  """Plays a loaded agent on a batched environment, one jitted step at a time.

  The runner owns the recurrent state and the previous action; `step()` lets the
  caller replace the observation (sprite injection) before the agent sees it, and
  `evaluate_frames()` runs many candidate frames from the current recurrent state
  without advancing it (perturbation saliency).
  """

  def __init__(self, agent: LoadedAgent, env, seed: int = 0, greedy: bool = False,
               attention_threshold: float = 0.0):
    self.agent = agent
    self.network = agent.network
    self.config = self.network.config
    self.greedy = greedy
    self._rng = jax.random.PRNGKey(seed)
    self.restart(env, attention_threshold)
    self._policy_step, self._evaluate = _compiled_functions(
        self.config, self.network.num_actions, self.network.observation_shape, greedy)

  def restart(self, env, attention_threshold: float = 0.0, seed: Optional[int] = None) -> None:
    """Starts over on `env` (reset) with zero recurrent state; the jitted functions are kept."""
    if seed is not None:
      self._rng = jax.random.PRNGKey(seed)
    self.env = env
    self.attention_threshold = float(attention_threshold)
    self._state = self.network.initial_state(env.num_envs)
    self._prev_action = np.zeros(env.num_envs, np.int32)
    self._env_step = env.reset()

  @property
  def env_step(self) -> EnvStep:
    """The environment step the agent will see next."""
    return self._env_step

  @property
  def basis(self) -> np.ndarray:
    h, w = self.config.vision_shape(self.network.observation_shape)
    return attention_lib.spatial_basis(h, w, self.config.basis_frequencies)

  def _inputs(self, observation) -> AgentInput:
    """What training actors feed the network, with `observation` in place of the env's."""
    return agent_input(self._env_step._replace(observation=np.asarray(observation)),
                       self._prev_action)

  def step(self, observation: Optional[np.ndarray] = None) -> tuple[StepRecord, EnvStep]:
    """Agent sees the current observation (or `observation`), acts, the env steps.

    Returns the record of env 0 and the environment step that the action produced.
    """
    observation = self._env_step.observation if observation is None else observation
    inputs = self._inputs(observation)
    self._rng, key = jax.random.split(self._rng)
    action, outputs, keys, self._state = self._policy_step(
        self.agent.params, key, inputs, self._state, jnp.float32(self.attention_threshold))
    action = np.asarray(action)
    has_attention = outputs.attention is not None
    record = StepRecord(
        frame=np.asarray(observation[0]), action=int(action[0]),
        logits=np.asarray(outputs.logits[0]),
        value=float(outputs.value[0]) + self.agent.value_offset,
        reward=float(self._env_step.reward[0]), is_first=bool(self._env_step.is_first[0]),
        attention=np.asarray(outputs.attention[0]) if has_attention else None,
        # The feature agents (002/003) have maps but no spatial queries or keys.
        queries=np.asarray(outputs.queries[0]) if outputs.queries is not None else None,
        keys=np.asarray(keys[0]) if keys is not None else None)
    self._prev_action = action
    self._env_step = self.env.step(action)
    return record, self._env_step

  def step_batch(self) -> tuple[np.ndarray, EnvStep]:
    """One step of all environments without building records (fast path for evaluation)."""
    inputs = self._inputs(self._env_step.observation)
    self._rng, key = jax.random.split(self._rng)
    action, _, _, self._state = self._policy_step(
        self.agent.params, key, inputs, self._state, jnp.float32(self.attention_threshold))
    self._prev_action = np.asarray(action)
    self._env_step = self.env.step(self._prev_action)
    return self._prev_action, self._env_step

  def evaluate_frames(self, frames: np.ndarray, batch_size: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Logits [P, A] and values [P] of env 0's agent on each of `frames` [P, H, W, C].

    Every frame is evaluated from the recurrent state and previous action/reward that
    the *current* observation would be processed with; the state is not advanced.
    Batches are padded to `batch_size` so the function compiles once.
    """
    frames = np.asarray(frames)
    single = jax.tree_util.tree_map(lambda x: x[:1], self._state)
    base = self._inputs(self._env_step.observation)
    logits, values = [], []
    for start in range(0, len(frames), batch_size):
      chunk = frames[start:start + batch_size]
      pad = batch_size - len(chunk)
      if pad:
        chunk = np.concatenate([chunk, np.repeat(chunk[:1], pad, axis=0)], axis=0)
      inputs = AgentInput(observation=chunk,
                          prev_action=np.full(batch_size, base.prev_action[0], np.int32),
                          prev_reward=np.full(batch_size, base.prev_reward[0], np.float32),
                          is_first=np.full(batch_size, base.is_first[0], bool))
      state = jax.tree_util.tree_map(lambda x: jnp.repeat(x, batch_size, axis=0), single)
      lg, v = self._evaluate(self.agent.params, inputs, state, jnp.float32(self.attention_threshold))
      logits.append(np.asarray(lg)[:batch_size - pad])
      values.append(np.asarray(v)[:batch_size - pad] + self.agent.value_offset)
    return np.concatenate(logits), np.concatenate(values)

  def close(self) -> None:
    self.env.close()


def play(runner: AgentRunner, steps: int, label: str, observation_hook=None,
         twin: Optional['RGBTwin'] = None) -> list[StepRecord]:
  """Plays `steps` steps, recording env 0, with progress lines about every 10 %.

  `observation_hook(t, observation) -> observation` may edit what the agent sees. With
  `twin` (an RGBTwin of the runner's gray environment) each record's frame is the twin's
  RGB frame of the same step.
  """
  records = []
  every = max(1, steps // 10)
  for t in range(steps):
    observation = runner.env_step.observation
    if observation_hook is not None:
      observation = observation_hook(t, observation)
    record, _ = runner.step(observation)
    if twin is not None:
      record = record._replace(frame=twin.follow(observation[0, ..., -1], record.action))
    records.append(record)
    if (t + 1) % every == 0 or t + 1 == steps:
      log(f'[{label}] step {t + 1}/{steps}')
  return records


def require_attention(agent: LoadedAgent, command: str) -> None:
  if not agent.network.has_attention:
    raise ValueError(f'{command} needs an attention network; this checkpoint is a '
                     f'{agent.network.config.kind!r} network without attention.')
