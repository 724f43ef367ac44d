"""The one environment factory: `config.env` -> a batched environment, its spec, its checks.

Every loop (distributed actors and evaluator, the single-machine trainer, the
analysis tools) builds environments here, so an env option means the same
everywhere. `config.env.name` picks the environment ('atari' when absent, as in
configs older than the field; 'atari_ram' for the games' RAM features,
`s3ta/envs/atari_ram.py`), `config.env.backend` the Atari backend
('envpool' when absent). Every environment returned has `send`/`recv` as well
as `step`, so callers can overlap the emulator with other work.
"""

import functools
from typing import Any, Optional

from s3ta.envs import atari
from s3ta.envs import atari_ram
from s3ta.envs.catch import BatchedCatch
from s3ta.envs import tmaze
from s3ta.envs.tmaze import BatchedTMaze

ENV_NAMES = ('atari', 'catch', 'atari_ram', 'tmaze')
ATARI_NAMES = ('atari', 'atari_ram')  # stepped by ALE/EnvPool: action repeat, human scores


def _get(env_config, key: str, default: Any = None) -> Any:
  """`env_config[key]` for a ConfigDict or dict, or `default` where the field is absent."""
  try:
    return env_config[key]
  except (KeyError, AttributeError):
    return default


def env_name(env_config) -> str:
  return _get(env_config, 'name', 'atari')


def backend(env_config) -> str:
  return _get(env_config, 'backend', 'envpool')


def frame_stack(env_config) -> int:
  return int(_get(env_config, 'frame_stack', 1))


def frames_per_step(env_config) -> int:
  """Emulator frames per agent step (the action repeat; 1 for Catch)."""
  return int(_get(env_config, 'frame_skip', atari.FRAME_SKIP)) if env_name(
      env_config) in ATARI_NAMES else 1


def game(env_config) -> str:
  """The Atari game's name, for human-normalised scores ('' for non-Atari environments)."""
  name = env_name(env_config)
  if name == 'atari_ram':
    return env_config['game']  # validated against the feature tables
  return atari.validate_game(env_config['game'], backend(env_config)) if name == 'atari' else ''


def validate(env_config) -> None:
  """Raises ValueError naming the first bad value of `config.env`, before anything starts.

  Covers the environment name, the backend (and that its package imports), the
  game for that backend, and the frame stack; the constructors check the rest.
  """
  name = env_name(env_config)
  if name not in ENV_NAMES:
    raise ValueError(f'Unknown config.env.name {name!r}; valid: {ENV_NAMES}.')
  stack = _get(env_config, 'frame_stack', 1)
  if not isinstance(stack, int) or isinstance(stack, bool) or stack < 1:
    raise ValueError(f'config.env.frame_stack must be an integer >= 1, got {stack!r}.')
  if _get(env_config, 'frame_stack_fill', 'first') not in atari.STACK_FILLS:
    raise ValueError('Unknown config.env.frame_stack_fill '
                     f"{_get(env_config, 'frame_stack_fill')!r}; valid: {atari.STACK_FILLS}.")
  if name == 'atari_ram':
    _validate_ram(env_config, stack)
    return
  if name == 'tmaze' and _get(env_config, 'start', 'centre') not in tmaze.STARTS:
    raise ValueError(f"Unknown config.env.start {_get(env_config, 'start')!r}; "
                     f'valid: {tmaze.STARTS}.')
  if name == 'tmaze' and _get(env_config, 'route', 'any') not in tmaze.ROUTES:
    raise ValueError(f"Unknown config.env.route {_get(env_config, 'route')!r}; "
                     f'valid: {tmaze.ROUTES}.')
  if name != 'atari':
    return
  chosen = backend(env_config)
  if chosen not in atari.BACKENDS:
    raise ValueError(f'Unknown config.env.backend {chosen!r}; valid: {atari.BACKENDS}.')
  if chosen == 'envpool':
    try:
      import envpool  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import  (installed?)
    except ImportError as e:
      raise ValueError("config.env.backend 'envpool' needs the envpool package (pip install "
                       "envpool==0.8.4; Python <= 3.10, Linux), which did not import: "
                       f"{e}; use config.env.backend='ale' instead.") from e
  atari.validate_game(env_config['game'], chosen)  # also checks that ale-py imports
  try:
    atari.check_options(
        num_envs=_get(env_config, 'num_envs', 1),
        max_episode_steps=_get(env_config, 'max_episode_steps', 1),
        frame_skip=_get(env_config, 'frame_skip', atari.FRAME_SKIP),
        noop_max=_get(env_config, 'noop_max', 30), num_threads=_get(env_config, 'num_threads', 0))
  except ValueError as e:
    raise ValueError(f'config.env.{e}') from e


def _validate_ram(env_config, stack: int) -> None:
  try:
    atari_ram.check_options(env_config['game'], _get(env_config, 'ram_history', 4),
                            _get(env_config, 'random_features', 0),
                            _get(env_config, 'distractors', 0),
                            _get(env_config, 'distractor_policy', ''),
                            _get(env_config, 'random_kind', 'uniform'))
    atari.check_options(
        num_envs=_get(env_config, 'num_envs', 1),
        max_episode_steps=_get(env_config, 'max_episode_steps', 1),
        frame_skip=_get(env_config, 'frame_skip', atari.FRAME_SKIP),
        noop_max=_get(env_config, 'noop_max', 30), num_threads=0)
  except ValueError as e:
    raise ValueError(f'config.env.{e}') from e
  if (_get(env_config, 'distractors', 0) and _get(env_config, 'distractor_policy', '') == 'checkpoint'
      and not _get(env_config, 'distractor_checkpoint', '')):
    raise ValueError("config.env.distractor_checkpoint must name the workdir or checkpoint of an "
                     "agent trained on the game's features alone, to play distractor_policy "
                     "'checkpoint'; got ''.")
  if stack != 1:
    raise ValueError('config.env.frame_stack must be 1 for atari_ram (the features carry '
                     f'their own history, config.env.ram_history), got {stack}.')
  atari_ram.import_ale()


def _ram_env(env_config, num_envs: int, seed: int, max_episode_steps: Optional[int]):
  """RAM-feature Atari; distractor games played by a trained agent when the config says so."""
  stepping = dict(frame_skip=int(_get(env_config, 'frame_skip', atari.FRAME_SKIP)),
                  noop_max=int(_get(env_config, 'noop_max', 30)),
                  max_episode_steps=int(max_episode_steps or _get(
                      env_config, 'max_episode_steps', atari.MAX_EPISODE_FRAMES // atari.FRAME_SKIP)))
  history, distractors = int(_get(env_config, 'ram_history', 4)), int(_get(env_config, 'distractors', 0))
  policy = str(_get(env_config, 'distractor_policy', ''))
  player = None
  if distractors and policy == 'checkpoint':
    # Lazy: the player restores a network (JAX, checkpoints); only this option needs it.
    from s3ta.acting.distractor_player import CheckpointDistractors  # pylint: disable=g-import-not-at-top
    try:
      player = CheckpointDistractors(
          str(_get(env_config, 'distractor_checkpoint', '')), env_config['game'], num_envs,
          distractors, seed + 1_000_003, history=history, **stepping)
    except FileNotFoundError as e:
      raise ValueError(f'config.env.distractor_checkpoint: {e}') from e
  return atari_ram.RamFeatureEnv(
      env_config['game'], num_envs, seed, history=history,
      random_features=int(_get(env_config, 'random_features', 0)),
      shuffle_seed=int(_get(env_config, 'feature_shuffle_seed', 0)),
      distractors=distractors, distractor_policy=policy,
      random_kind=str(_get(env_config, 'random_kind', 'uniform')),
      full_action_space=bool(_get(env_config, 'full_action_space', False)),
      distractor_player=player, **stepping)


def make_env(env_config, num_envs: int, seed: int, *, max_episode_steps: Optional[int] = None,
             num_threads: Optional[int] = None):
  """The batched environment of `env_config` with `num_envs` copies, env i seeded `seed + i`.

  Args:
    max_episode_steps: overrides `env_config.max_episode_steps` (Atari only).
    num_threads: overrides `env_config.num_threads` (Atari only).
  """
  validate(env_config)
  if env_name(env_config) == 'catch':
    env = BatchedCatch(num_envs, rows=_get(env_config, 'rows', 10),
                       columns=_get(env_config, 'columns', 5),
                       pixel_scale=_get(env_config, 'pixel_scale', 1), seed=seed)
    env = _SplitStep(env)
  elif env_name(env_config) == 'tmaze':
    env = _SplitStep(BatchedTMaze(num_envs, max_steps=int(_get(env_config, 'max_steps', 200)),
                                  seed=seed, start=_get(env_config, 'start', 'centre'),
                                  route=_get(env_config, 'route', 'any')))
  elif env_name(env_config) == 'atari_ram':
    env = _ram_env(env_config, num_envs, seed, max_episode_steps)
  else:
    if backend(env_config) == 'ale':
      from s3ta.envs.ale import AleAtariEnv as env_class  # pylint: disable=g-import-not-at-top  (lazy: ale-py optional)
    else:
      env_class = atari.AtariEnv
    env = env_class(
        env_config['game'], num_envs, seed,
        light_observation=bool(_get(env_config, 'light_observation', False)),
        full_action_space=bool(_get(env_config, 'full_action_space', False)),
        frame_skip=int(_get(env_config, 'frame_skip', atari.FRAME_SKIP)),
        noop_max=int(_get(env_config, 'noop_max', 30)),
        max_episode_steps=int(max_episode_steps or _get(env_config, 'max_episode_steps',
                                                        atari.MAX_EPISODE_FRAMES // atari.FRAME_SKIP)),
        num_threads=int(_get(env_config, 'num_threads', 0) if num_threads is None else num_threads))
  stack = frame_stack(env_config)
  if stack == 1:
    return env
  return atari.FrameStack(env, stack, _get(env_config, 'frame_stack_fill', 'first'))


def env_spec(env_config) -> tuple[int, tuple[int, int, int]]:
  """(num_actions, observation_shape) of `env_config`'s environment."""
  validate(env_config)
  if env_name(env_config) in ('catch', 'atari_ram', 'tmaze'):
    env = make_env(env_config, 1, 0)
    spec = env.num_actions, tuple(env.observation_shape)
    env.close()
    return spec
  return _atari_spec(env_config['game'], backend(env_config),
                     bool(_get(env_config, 'light_observation', False)),
                     bool(_get(env_config, 'full_action_space', False)), frame_stack(env_config))


@functools.lru_cache(maxsize=None)
def _atari_spec(game_: str, backend_: str, light: bool, full_action_space: bool,
                stack: int) -> tuple[int, tuple[int, int, int]]:
  env = make_env({'name': 'atari', 'backend': backend_, 'game': game_, 'light_observation': light,
                  'full_action_space': full_action_space}, 1, 0, num_threads=1)
  num_actions = env.num_actions
  env.close()
  return num_actions, atari.observation_shape(light, stack)


class _SplitStep:
  """Gives an environment that only has `step` the `send`/`recv` halves (stepping in `recv`)."""

  def __init__(self, env):
    self.env = env
    self.num_envs, self.num_actions = env.num_envs, env.num_actions
    self.observation_shape = env.observation_shape
    self._actions = None

  def reset(self):
    return self.env.reset()

  def step(self, actions):
    return self.env.step(actions)

  def send(self, actions) -> None:
    if self._actions is not None:
      raise ValueError('send() called twice without recv() in between.')
    self._actions = actions

  def recv(self):
    if self._actions is None:
      raise ValueError('recv() called without a pending send().')
    actions, self._actions = self._actions, None
    return self.env.step(actions)

  def close(self) -> None:
    self.env.close()
