"""Semantic Atari features from the console RAM (papers 002 and 003): `config.env.name = 'atari_ram'`.

The agents of "Attention or memory?" and "Generalized attention-weighted RL" see a
game's annotated state variables instead of pixels: the RAM bytes that hold the
player's, enemies' and ball's positions, scores and the like, as published with the
Atari Annotated RAM Interface (Anand et al. 2019, AtariARI). `FEATURES` holds those
tables for the papers' games; their sizes are the papers' feature counts (Pong 8,
DemonAttack 10, Asteroids 41, Breakout 35).

Observation: uint8 [F, T, 1], feature f's byte over the last T agent steps (oldest
first; a new episode fills its history with its first value). F is the game's
features, then those of `distractors` other instances of the same game (003's
distractor environments: the agent acts in one instance only; the others are played
by `distractor_policy`: 'random', uniformly random actions, or 'checkpoint', a trained
agent's policy, `s3ta/acting/distractor_player.py`, as 003 does), then
`random_features` irrelevant bytes: drawn uniformly at random every step
(`random_kind='uniform'`, 002) or each a sine of its own period and phase
(`'periodic'`, 003: "sampled from different periodic functions to prevent large
changes in the same feature within single frame updates"), in an order shuffled by
`shuffle_seed` and fixed for the run (002 App. D); `feature_names` gives the order.
Networks scale bytes by 1/255, as they do pixels, so the features reach them in [0, 1].

Stepping matches the pixel backends (`s3ta/envs/atari.py`): action repeat `frame_skip`
(rewards summed), up to `noop_max` no-ops at an episode's start, the minimal or full
action set, no life-loss termination, truncation after `max_episode_steps` agent
steps, the terminal observation (`last`, discount 0) and then the new episode's first
one step later (`is_first`, reward 0, discount 0). ALE's vector env does not expose the
RAM, so each environment is its own `ale_py.ALEInterface`, stepped in turn.
"""

from typing import Optional

import numpy as np

from s3ta.envs import atari
from s3ta.envs.base import EnvStep, checked_actions

# AtariARI's RAM addresses of each annotated state variable, lists expanded to name_i.
FEATURES = {
    'Pong': (('player_y', 51), ('player_x', 46), ('enemy_y', 50), ('enemy_x', 45),
             ('ball_x', 49), ('ball_y', 54), ('enemy_score', 13), ('player_score', 14)),
    'Breakout': (('ball_x', 99), ('ball_y', 101), ('player_x', 72), ('blocks_hit_count', 77),
                 *((f'block_bit_map_{i}', i) for i in range(30)), ('score', 84)),
    'DemonAttack': (('level', 62), ('player_x', 22), ('enemy_x1', 17), ('enemy_x2', 18),
                    ('enemy_x3', 19), ('missile_y', 21), ('enemy_y1', 69), ('enemy_y2', 70),
                    ('enemy_y3', 71), ('num_lives', 114)),
    'Asteroids': (*((f'enemy_asteroids_y_{i}', a) for i, a in enumerate(
                      (3, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15, 16, 17, 18, 19))),
                  *((f'enemy_asteroids_x_{i}', a) for i, a in enumerate(
                      (21, 22, 23, 24, 25, 26, 27, 30, 31, 32, 33, 34, 35, 36, 37))),
                  ('player_x', 73), ('player_y', 74), ('num_lives_direction', 60),
                  ('player_score_high', 61), ('player_score_low', 62), ('player_missile_x1', 83),
                  ('player_missile_x2', 84), ('player_missile_y1', 86), ('player_missile_y2', 87),
                  ('player_missile1_direction', 89), ('player_missile2_direction', 90)),
}
MAX_RANDOM_FEATURES = 1024
MAX_HISTORY = 64
MAX_DISTRACTORS = 7
DISTRACTOR_POLICIES = ('random', 'checkpoint')  # who plays the distractor instances
RANDOM_KINDS = ('uniform', 'periodic')  # 002's random bytes, 003's periodic ones
PERIODS = (16.0, 256.0)  # agent steps: the periodic features' periods, log-uniform in this range


def check_options(game: str, history: int, random_features: int, distractors: int = 0,
                  distractor_policy: str = '', random_kind: str = 'uniform') -> None:
  """Raises ValueError naming the first bad value (game, history, random features, distractors)."""
  if game not in FEATURES:
    raise ValueError(f"no RAM feature table for game {game!r}; games with one: "
                     f"{tuple(sorted(FEATURES))}.")
  if not isinstance(history, int) or not 1 <= history <= MAX_HISTORY:
    raise ValueError(f'ram_history must be an integer in [1, {MAX_HISTORY}], got {history!r}.')
  if not isinstance(random_features, int) or not 0 <= random_features <= MAX_RANDOM_FEATURES:
    raise ValueError(f'random_features must be an integer in [0, {MAX_RANDOM_FEATURES}], got '
                     f'{random_features!r}.')
  if random_kind not in RANDOM_KINDS:
    raise ValueError(f'random_kind must be one of {RANDOM_KINDS}, got {random_kind!r}.')
  if not isinstance(distractors, int) or not 0 <= distractors <= MAX_DISTRACTORS:
    raise ValueError(f'distractors must be an integer in [0, {MAX_DISTRACTORS}], got '
                     f'{distractors!r}.')
  if distractors and distractor_policy not in DISTRACTOR_POLICIES:
    raise ValueError(f'distractor_policy {distractor_policy!r} cannot play {distractors} '
                     f'distractor game(s); allowed: {DISTRACTOR_POLICIES}.')


DISTRACTOR_PREFIX, RANDOM_PREFIX = 'distractor', 'random_'  # names of the irrelevant features
IRRELEVANT_PREFIXES = (DISTRACTOR_PREFIX, RANDOM_PREFIX)


def feature_order(game: str, random_features: int, shuffle_seed: int,
                  distractors: int = 0) -> tuple[list[str], np.ndarray]:
  """(names in observation order, permutation): position j shows feature `perm[j]` of the
  unshuffled list (the game's features, each distractor's, then the random ones)."""
  own = [name for name, _ in FEATURES[game]]
  names = own + [f'{DISTRACTOR_PREFIX}{d}_{name}' for d in range(1, distractors + 1) for name in own]
  names += [f'{RANDOM_PREFIX}{i}' for i in range(random_features)]
  perm = np.random.default_rng(shuffle_seed).permutation(len(names))
  return [names[i] for i in perm], perm


def import_ale():
  # Lazy: ale-py is optional; without it only this environment fails, with one line.
  try:
    import ale_py  # pylint: disable=g-import-not-at-top
    from ale_py import roms  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ValueError("config.env.name 'atari_ram' needs ale-py (pip install ale-py==0.12.1), "
                     f'which did not import: {e}.') from e
  return ale_py, roms


class RamFeatureEnv:
  """`num_envs` games whose observations are their RAM features' recent history."""

  def __init__(self, game: str, num_envs: int, seed: int, *, history: int = 4,
               random_features: int = 0, shuffle_seed: int = 0, distractors: int = 0,
               distractor_policy: str = '', random_kind: str = 'uniform',
               distractor_player=None,
               frame_skip: int = atari.FRAME_SKIP, noop_max: int = 30,
               max_episode_steps: int = atari.MAX_EPISODE_FRAMES // atari.FRAME_SKIP,
               full_action_space: bool = False, repeat_action_probability: float = 0.0):
    check_options(game, history, random_features, distractors, distractor_policy, random_kind)
    if (distractor_policy == 'checkpoint' and distractors > 0) != (distractor_player is not None):
      raise ValueError("distractor_policy 'checkpoint' needs a distractor_player (the trained "
                       'agent playing the distractor games), and only it.')
    atari.check_options(num_envs=num_envs, max_episode_steps=max_episode_steps,
                        frame_skip=frame_skip, noop_max=noop_max, num_threads=0,
                        repeat_action_probability=repeat_action_probability)
    ale_py, roms = import_ale()
    from s3ta.envs.ale import rom_id  # pylint: disable=g-import-not-at-top  (ale-py present now)
    rom = roms.get_rom_path(rom_id(game))
    self.game, self.num_envs, self._frame_skip, self._noop_max = game, num_envs, frame_skip, noop_max


    def make_ale(ale_seed: int):
      ale = ale_py.ALEInterface()
      ale.setLoggerMode(ale_py.LoggerMode.Error)
      ale.setInt('random_seed', ale_seed % 2**31)
      ale.setFloat('repeat_action_probability', repeat_action_probability)
      ale.setInt('max_num_frames_per_episode', max_episode_steps * frame_skip)
      ale.loadROM(rom)
      return ale

    self._ales = [make_ale(seed + i) for i in range(num_envs)]
    # Env i's distractor games, each its own seed stream (never an agent env's seed).
    # With a `distractor_player` (a trained agent), it owns and steps those games instead.
    self._player = distractor_player
    # Its games' features [num_envs, distractors, F], read once per agent step, not per env.
    self._played = distractor_player.features() if distractor_player is not None else None
    self._distractors = [[make_ale(seed + 1_000_003 * d + i) for d in range(1, distractors + 1)]
                         for i in range(num_envs)] if self._player is None else [[]] * num_envs
    actions = (self._ales[0].getLegalActionSet() if full_action_space
               else self._ales[0].getMinimalActionSet())
    self._action_set = list(actions)
    self.num_actions = len(self._action_set)
    self._addresses = np.asarray([address for _, address in FEATURES[game]], np.int64)
    self._random_features = random_features
    self.feature_names, self._perm = feature_order(game, random_features, shuffle_seed,
                                                   distractors)
    self.feature_order_permutation = self._perm  # position j shows unshuffled feature perm[j]
    self.observation_shape = (len(self.feature_names), history, 1)
    self._rng = np.random.default_rng(seed)  # no-op counts and random features
    # 'periodic': env i's random feature j is a sine of period P[i, j] and phase phi[i, j]
    # in its agent steps, 127.5 (1 + sin(2 pi t / P + phi)): one step moves it by at most
    # 127.5 * 2 pi / 16 = 50 of 255.
    self._periodic = random_kind == 'periodic'
    if self._periodic:  # drawn only here, so 'uniform' runs keep their random streams
      periods = np.exp(self._rng.uniform(*np.log(PERIODS), (num_envs, random_features)))
      self._angular_speed = 2 * np.pi / periods
      self._phase = self._rng.uniform(0, 2 * np.pi, (num_envs, random_features))
    self._clock = np.zeros(num_envs, np.int64)  # agent steps of env i, across episodes
    self._history = np.zeros((num_envs, len(self.feature_names), history), np.uint8)
    self._ended = np.zeros(num_envs, bool)
    self._pending: Optional[np.ndarray] = None

  def _features(self, i: int) -> np.ndarray:
    games = [self._ales[i]] + self._distractors[i]
    real = [ale.getRAM()[self._addresses] for ale in games]
    if self._played is not None:
      real += list(self._played[i])
    if self._periodic:
      angle = self._angular_speed[i] * self._clock[i] + self._phase[i]
      noise = np.round(127.5 * (1.0 + np.sin(angle))).astype(np.uint8)
    else:
      noise = self._rng.integers(0, 256, self._random_features, dtype=np.uint8)
    return np.concatenate(real + [noise])[self._perm]

  def _step_distractors(self, i: int) -> None:
    """One agent step of env i's distractor games under their policy (random actions)."""
    for ale in self._distractors[i]:
      action = self._action_set[int(self._rng.integers(0, self.num_actions))]
      for _ in range(self._frame_skip):
        ale.act(action)
        if ale.game_over():
          ale.reset_game()
          break

  def _start(self, i: int) -> None:
    """A new episode in env i (after up to `noop_max` no-ops), its history filled."""
    ale = self._ales[i]
    ale.reset_game()
    for _ in range(int(self._rng.integers(1, self._noop_max + 1))):
      ale.act(self._action_set[0])
      if ale.game_over():
        ale.reset_game()
    self._history[i] = self._features(i)[:, None]

  def _observation(self) -> np.ndarray:
    return self._history[..., None].copy()

  def reset(self) -> EnvStep:
    for i in range(self.num_envs):
      for ale in self._distractors[i]:
        ale.reset_game()
      self._start(i)
    self._ended[:] = False
    zeros = np.zeros(self.num_envs, np.float32)
    return EnvStep(self._observation(), zeros, zeros.copy(), np.ones(self.num_envs, bool),
                   np.zeros(self.num_envs, bool))

  def send(self, actions) -> None:
    actions = checked_actions(actions, self.num_envs, self.num_actions)
    if self._pending is not None:
      raise ValueError('send() called twice without recv() in between.')
    self._pending = actions

  def recv(self) -> EnvStep:
    if self._pending is None:
      raise ValueError('recv() called without a pending send().')
    actions, self._pending = self._pending, None
    reward = np.zeros(self.num_envs, np.float32)
    is_first = self._ended.copy()
    last = np.zeros(self.num_envs, bool)
    self._clock += 1
    if self._player is not None:
      self._player.step()
      self._played = self._player.features()
    for i, ale in enumerate(self._ales):
      self._step_distractors(i)  # they run on through the agent's episode boundaries
      if is_first[i]:  # the step after an episode's last one starts the next (reward 0)
        self._start(i)
        continue
      for _ in range(self._frame_skip):
        reward[i] += ale.act(self._action_set[int(actions[i])])
        if ale.game_over():
          break
      last[i] = ale.game_over()  # terminated, or truncated at max_episode_steps
      self._history[i] = np.roll(self._history[i], -1, axis=1)
      self._history[i, :, -1] = self._features(i)
    self._ended = last
    discount = np.where(last | is_first, 0.0, 1.0).astype(np.float32)
    return EnvStep(self._observation(), reward, discount, is_first, last.copy())

  def step(self, actions) -> EnvStep:
    self.send(actions)
    return self.recv()

  def close(self) -> None:
    self._ales, self._distractors = [], []
    if self._player is not None:
      self._player.close()
      self._player = None
