"""Batched Atari (ALE v5 protocol) environments as a `BatchedEnv`, and what both backends share.

Two backends step the same emulator with the same preprocessing: EnvPool 0.8.4 (`AtariEnv`
here, the default) and ale-py's vector environment (`s3ta/envs/ale.py`). Both return
channel-last `[B, H, W, C]` uint8 frames in env-id order, mapped to `EnvStep` as
`s3ta/envs/base.py` describes: the terminal step has `last=True`, `discount=0`; the step after
it ignores the action and returns the new episode's first observation (`is_first=True`,
`discount=0`, `reward=0`). Stepping is synchronous (`batch_size == num_envs`); `send()`/`recv()`
split `step()` for callers that overlap the emulator with other work. Defaults are the paper's
(000, A.1) and the standard ALE protocol (WORKSPACE.md, "The distributed program").
"""

import functools
from typing import Optional

import numpy as np

from s3ta.envs.base import EnvStep

# The 57 games of the standard Atari benchmark (Mnih et al. 2015; Badia et al. 2020), EnvPool names.
ATARI_GAMES = (
    'Alien', 'Amidar', 'Assault', 'Asterix', 'Asteroids', 'Atlantis', 'BankHeist', 'BattleZone',
    'BeamRider', 'Berzerk', 'Bowling', 'Boxing', 'Breakout', 'Centipede', 'ChopperCommand',
    'CrazyClimber', 'Defender', 'DemonAttack', 'DoubleDunk', 'Enduro', 'FishingDerby', 'Freeway',
    'Frostbite', 'Gopher', 'Gravitar', 'Hero', 'IceHockey', 'Jamesbond', 'Kangaroo', 'Krull',
    'KungFuMaster', 'MontezumaRevenge', 'MsPacman', 'NameThisGame', 'Phoenix', 'Pitfall', 'Pong',
    'PrivateEye', 'Qbert', 'Riverraid', 'RoadRunner', 'Robotank', 'Seaquest', 'Skiing', 'Solaris',
    'SpaceInvaders', 'StarGunner', 'Surround', 'Tennis', 'TimePilot', 'Tutankham', 'UpNDown',
    'Venture', 'VideoPinball', 'WizardOfWor', 'YarsRevenge', 'Zaxxon')

RGB_SHAPE = (210, 160, 3)
LIGHT_SHAPE = (84, 84, 1)  # `light_observation`: gray 84x84, for CPU-only runs
FRAME_SKIP = 4  # action repeat; one agent step = 4 emulator frames
MAX_EPISODE_FRAMES = 108_000  # 30 minutes of play at 60 Hz


BACKENDS = ('envpool', 'ale')  # 'envpool' is the default


def observation_shape(light_observation: bool, frame_stack: int = 1) -> tuple[int, int, int]:
  """[H, W, C] of a (stacked) frame: 210x160x3k RGB or 84x84xk gray."""
  height, width, channels = LIGHT_SHAPE if light_observation else RGB_SHAPE
  return height, width, channels * frame_stack


@functools.lru_cache(maxsize=None)
def available_games(backend: str = 'envpool') -> tuple[str, ...]:
  """Every Atari game the backend has, by EnvPool's CamelCase name (a superset of ATARI_GAMES)."""
  if backend == 'ale':
    from s3ta.envs import ale  # pylint: disable=g-import-not-at-top  (lazy: ale-py optional)
    return ale.available_games()
  import envpool  # pylint: disable=g-import-not-at-top  (lazy: the pure core stays envpool-free)
  from envpool import registration  # pylint: disable=g-import-not-at-top
  specs = registration.registry.specs
  return tuple(sorted(task[:-len('-v5')] for task in envpool.list_all_envs()
                      if task.endswith('-v5') and specs[task][0].startswith('envpool.atari')))


def validate_game(name: str, backend: str = 'envpool') -> str:
  """Returns the game's name ('Pong' for 'Pong' or 'Pong-v5'); ValueError if unknown."""
  game = name[:-len('-v5')] if isinstance(name, str) and name.endswith('-v5') else name
  valid = available_games(backend)
  if game not in valid:
    raise ValueError(f'Unknown Atari game {name!r} for backend {backend!r}; valid games: '
                     f'{", ".join(valid)}.')
  return game


def check_options(*, num_envs: int, max_episode_steps: int, frame_skip: int, noop_max: int,
                  num_threads: int, seed: int = 0, repeat_action_probability: float = 0.0) -> None:
  """Raises ValueError naming the first option outside what every backend accepts."""
  for name, value, low in (('num_envs', num_envs, 1), ('max_episode_steps', max_episode_steps, 1),
                           ('frame_skip', frame_skip, 1), ('noop_max', noop_max, 1),
                           ('num_threads', num_threads, 0)):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
      hint = ' (1 means no no-ops; EnvPool crashes on 0)' if name == 'noop_max' else ''
      raise ValueError(f'{name} must be an integer >= {low}{hint}, got {value!r}.')
  if not -2**31 <= seed < 2**31:
    raise ValueError(f'seed must fit in int32, got {seed}.')
  if not 0.0 <= repeat_action_probability <= 1.0:
    raise ValueError(f'repeat_action_probability must be in [0, 1], got {repeat_action_probability}.')


class BatchedAtari:
  """What both backends share: argument checks, the send/recv protocol, `EnvStep` flags.

  A backend implements `_reset_frames() -> frames`, `_send(actions)` and
  `_recv() -> (frames, reward, terminated, truncated)`, frames channel-last
  `[B, H, W, C]` in env-id order. Environment i is seeded with `seed + i`, so two
  instances built with the same arguments produce the same episodes for the same
  actions, whatever the backend.
  """

  backend = ''

  def __init__(self, game: str, num_envs: int, seed: int = 0, *,
               light_observation: bool = False,
               max_episode_steps: int = MAX_EPISODE_FRAMES // FRAME_SKIP,
               full_action_space: bool = False, frame_skip: int = FRAME_SKIP,
               noop_max: int = 30, repeat_action_probability: float = 0.0,
               num_threads: int = 0):
    """Checks the arguments shared by every backend.

    Args:
      game: game name, e.g. 'Pong' or 'MsPacman'; see `available_games(backend)`.
      num_envs: number of emulators B.
      seed: seed of environment 0 (int32).
      light_observation: 84x84x1 grayscale frames instead of 210x160x3 RGB.
      max_episode_steps: agent steps after which an episode is truncated (27 000 = 108 000 frames).
      full_action_space: use all 18 ALE actions instead of the game's minimal set.
      frame_skip: action repeat (4 in the paper); frames are max-pooled over the last two.
      noop_max: episodes start with a uniform number of no-ops in [0, noop_max) (1: none).
      repeat_action_probability: sticky actions (0 = the paper's deterministic ALE).
      num_threads: worker threads; 0 lets the backend choose (one per env, capped by cores).
    """
    self.game = validate_game(game, self.backend)
    check_options(num_envs=num_envs, max_episode_steps=max_episode_steps, frame_skip=frame_skip,
                  noop_max=noop_max, num_threads=num_threads, seed=seed,
                  repeat_action_probability=repeat_action_probability)
    self.num_envs, self.seed = int(num_envs), int(seed)
    self.light_observation, self.max_episode_steps = bool(light_observation), int(max_episode_steps)
    self.full_action_space, self.frame_skip = bool(full_action_space), int(frame_skip)
    self.noop_max, self.num_threads = int(noop_max), int(num_threads)
    self.repeat_action_probability = float(repeat_action_probability)
    self.observation_shape = observation_shape(light_observation)
    self._pending = False  # a send() awaits its recv()
    self._closed = False

  def reset(self) -> EnvStep:
    """Starts new episodes in every environment; all steps are first steps."""
    frames = self._reset_frames()
    zeros = np.zeros(self.num_envs, np.float32)
    return EnvStep(observation=frames, reward=zeros, discount=zeros.copy(),
                   is_first=np.ones(self.num_envs, bool), last=np.zeros(self.num_envs, bool))

  def step(self, actions: np.ndarray) -> EnvStep:
    """Applies int actions [B] (action repeat included) and returns the next EnvStep [B]."""
    self.send(actions)
    return self.recv()

  def send(self, actions: np.ndarray) -> None:
    """First half of `step`: starts the emulators on `actions` [B] and returns at once."""
    actions = np.asarray(actions)
    if actions.shape != (self.num_envs,) or not np.issubdtype(actions.dtype, np.integer):
      raise ValueError(f'actions must be integers of shape ({self.num_envs},), got '
                       f'{actions.dtype} {actions.shape}.')
    if actions.size and (actions.min() < 0 or actions.max() >= self.num_actions):
      raise ValueError(f'actions must be in [0, {self.num_actions}), got min {actions.min()} '
                       f'max {actions.max()}.')
    if self._closed:
      raise ValueError('The environment is closed.')
    if self._pending:
      raise ValueError('send() called twice without recv() in between.')
    self._send(actions.astype(np.int32))
    self._pending = True

  def recv(self) -> EnvStep:
    """Second half of `step`: waits for the emulators and returns the EnvStep [B]."""
    if not self._pending:
      raise ValueError('recv() called without a pending send().')
    frames, reward, terminated, truncated, is_first = self._recv()
    self._pending = False
    last = np.logical_or(terminated, truncated)
    discount = np.where(last | is_first, 0.0, 1.0).astype(np.float32)
    reward = np.where(is_first, 0.0, reward).astype(np.float32)
    return EnvStep(observation=frames, reward=reward, discount=discount, is_first=is_first,
                   last=last)

  def close(self) -> None:
    self._closed = True


class AtariEnv(BatchedAtari):
  """EnvPool 0.8.4's Atari: `num_envs` auto-resetting games stepped together.

  EnvPool's `elapsed_step` is 0 exactly on an episode's first observation, which
  gives `is_first`. EnvPool segfaults on `noop_max=0`, hence the shared `>= 1` rule.
  """

  backend = 'envpool'

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    import envpool  # pylint: disable=g-import-not-at-top  (lazy: envpool is optional, see above)
    height, width, _ = self.observation_shape
    self._env = envpool.make(
        f'{self.game}-v5', env_type='gym', num_envs=self.num_envs, batch_size=self.num_envs,
        num_threads=self.num_threads, seed=self.seed, stack_num=1, frame_skip=self.frame_skip,
        max_episode_steps=self.max_episode_steps, noop_max=self.noop_max, episodic_life=False,
        reward_clip=False, full_action_space=self.full_action_space, use_fire_reset=True,
        repeat_action_probability=self.repeat_action_probability, img_height=height,
        img_width=width, gray_scale=self.light_observation)
    self.num_actions = int(self._env.action_space.n)

  def _reset_frames(self) -> np.ndarray:
    obs, info = self._env.reset()
    return _channel_last(obs[_env_order(info)])

  def _send(self, actions: np.ndarray) -> None:
    self._env.send(actions, np.arange(self.num_envs, dtype=np.int32))

  def _recv(self):
    obs, reward, terminated, truncated, info = self._env.recv()
    order = _env_order(info)
    # elapsed_step counts agent steps in the current episode: 0 only on a first observation.
    is_first = np.asarray(info['elapsed_step'])[order] == 0
    return (_channel_last(obs[order]), np.asarray(reward)[order], np.asarray(terminated)[order],
            np.asarray(truncated)[order], is_first)

  def close(self) -> None:
    """Stops EnvPool's worker threads (EnvPool has no explicit close; dropping it joins them)."""
    super().close()
    self._env = None


STACK_FILLS = ('first', 'zeros')


class FrameStack:
  """Stacks the last `k` frames of a batched env along channels (oldest first).

  On an episode's first step the older slots are filled with that frame (`fill='first'`,
  the DQN convention) or with zeros (`fill='zeros'`: blank frames, so the stack says how
  much of it is this episode's), and no frame of the previous episode is ever seen.
  Backend-independent (we do not use the backends' own stacking: EnvPool fills with the
  first frame, ALE with zeros). Why zeros for the T-maze's attention agent: with copies, a
  blocked first move leaves the whole window unchanged, and a greedy policy that chose it
  repeats it for the rest of the episode (BENCHMARKS.md, T-maze routes).
  """

  def __init__(self, env, k: int, fill: str = 'first'):
    if not isinstance(k, (int, np.integer)) or k < 1:
      raise ValueError(f'frame_stack must be an integer >= 1, got {k!r}.')
    if fill not in STACK_FILLS:
      raise ValueError(f'Unknown frame stack fill {fill!r}; valid: {STACK_FILLS}.')
    self.env, self.k, self._fill = env, int(k), fill
    self.num_envs, self.num_actions = env.num_envs, env.num_actions
    height, width, channels = env.observation_shape
    self.observation_shape = (height, width, channels * self.k)
    self._frames = np.zeros((self.num_envs,) + self.observation_shape, np.uint8)

  def _stack(self, env_step: EnvStep) -> EnvStep:
    frame = env_step.observation
    channels = frame.shape[-1]
    self._frames[..., :-channels] = self._frames[..., channels:]
    self._frames[..., -channels:] = frame
    first = np.asarray(env_step.is_first, bool)
    if first.any():
      older = frame[first] if self._fill == 'first' else np.zeros_like(frame[first])
      self._frames[first] = np.concatenate([older] * (self.k - 1) + [frame[first]], axis=-1)
    return env_step._replace(observation=self._frames.copy())

  def reset(self) -> EnvStep:
    return self._stack(self.env.reset())

  def step(self, actions) -> EnvStep:
    return self._stack(self.env.step(actions))

  def send(self, actions) -> None:
    self.env.send(actions)

  def recv(self) -> EnvStep:
    return self._stack(self.env.recv())

  def close(self) -> None:
    self.env.close()


def _env_order(info) -> slice:
  env_id = np.asarray(info['env_id'])
  return slice(None) if np.all(env_id[1:] > env_id[:-1]) else np.argsort(env_id)  # sync: sorted


def _channel_last(obs: np.ndarray) -> np.ndarray:
  """[B, C, H, W] -> contiguous [B, H, W, C] (EnvPool is channel-first).

  Stacking the channel planes is ~5x faster than a strided transpose copy of uint8
  (0.6 vs 2.8 ms for 8 RGB frames here), which matters at ~10 K frames/s.
  """
  if obs.shape[1] == 1:
    return obs.reshape(obs.shape[0], obs.shape[2], obs.shape[3], 1)
  return np.stack([obs[:, c] for c in range(obs.shape[1])], axis=-1)
