"""The Arcade Learning Environment's own vector environment as a second Atari backend.

`config.env.backend = 'ale'`. Why a second backend: EnvPool 0.8.4 has no wheels for
Python >= 3.11 or macOS, GPU machines often carry a newer stack than our pins, and
ALE exposes the console RAM that feature-based agents need. ale-py 0.12's
`AtariVectorEnv` runs the same C++ preprocessing as EnvPool (frame skip with a
max-pool of the last two frames, no-op starts drawn the same way, FIRE on reset,
area resize to 84x84 gray); for one seed, action sequence and `noop_max=1` both
backends give identical frames, rewards and episode ends except the terminal
frame itself (tests/test_ale.py). Semantics follow `s3ta/envs/atari.py`.

Differences handled here: game names are ROM ids ('ms_pacman' for EnvPool's
'MsPacman'); ALE's episode limit counts emulator frames (we pass
`max_episode_steps * frame_skip`, which truncates at the same agent step as
EnvPool); ALE has no `elapsed_step`, so `is_first` is "the previous step ended
the episode" (its NEXT_STEP autoreset returns the new episode's first frame one
step after the last one, as EnvPool does); observations come as
`[B, stack, H, W(, 3)]`.
"""

import functools

import numpy as np

from s3ta.envs import atari

PACKAGE_HINT = 'pip install ale-py==0.12.1 gymnasium==1.4.0'


def rom_id(game: str) -> str:
  """ALE's ROM id of an EnvPool-style game name: 'MsPacman' -> 'ms_pacman', 'UpNDown' -> 'up_n_down'."""
  return ''.join(f'_{c.lower()}' if c.isupper() and i else c.lower() for i, c in enumerate(game))


def game_name(rom: str) -> str:
  """EnvPool-style game name of an ALE ROM id: 'ms_pacman' -> 'MsPacman'."""
  return ''.join(part[:1].upper() + part[1:] for part in rom.split('_'))


def _import_ale():
  # Lazy: ale-py is optional; without it only the 'ale' backend fails, with one line.
  try:
    import ale_py  # pylint: disable=g-import-not-at-top
    from ale_py import roms  # pylint: disable=g-import-not-at-top
    from ale_py import vector_env  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ValueError(f"env backend 'ale' needs ale-py with its vector env ({PACKAGE_HINT}); "
                     f'import failed: {e}') from e
  return ale_py, roms, vector_env


@functools.lru_cache(maxsize=None)
def available_games() -> tuple[str, ...]:
  """Every game whose ROM ale-py ships, by EnvPool-style name."""
  _, roms, _ = _import_ale()
  return tuple(sorted(game_name(rom) for rom in roms.get_all_rom_ids()))


class AleAtariEnv(atari.BatchedAtari):
  """`num_envs` auto-resetting games of ale-py's `AtariVectorEnv`; implements `BatchedEnv`."""

  backend = 'ale'

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    _, _, vector_env = _import_ale()
    height, width, _ = self.observation_shape
    self._env = vector_env.AtariVectorEnv(
        rom_id(self.game), self.num_envs, num_threads=self.num_threads,
        max_num_frames_per_episode=self.max_episode_steps * self.frame_skip,
        repeat_action_probability=self.repeat_action_probability,
        full_action_space=self.full_action_space, img_height=height, img_width=width,
        grayscale=self.light_observation, stack_num=1, frameskip=self.frame_skip, maxpool=True,
        noop_max=self.noop_max, episodic_life=False, reward_clipping=False, use_fire_reset=True)
    self.num_actions = int(self._env.single_action_space.n)
    self._ended = np.zeros(self.num_envs, bool)  # the previous step ended the episode

  def _frames(self, obs: np.ndarray) -> np.ndarray:
    """[B, 1, H, W] gray or [B, 1, H, W, 3] RGB -> contiguous [B, H, W, C]."""
    height, width, channels = self.observation_shape
    return np.ascontiguousarray(obs.reshape(self.num_envs, height, width, channels))

  def _reset_frames(self) -> np.ndarray:
    obs, _ = self._env.reset(seed=self.seed)
    self._ended[:] = False
    return self._frames(obs)

  def _send(self, actions: np.ndarray) -> None:
    self._env.send(actions)

  def _recv(self):
    obs, reward, terminated, truncated, info = self._env.recv()
    if not np.all(np.asarray(info['env_id']) == np.arange(self.num_envs)):
      raise RuntimeError(f'ALE returned environments {info["env_id"]} out of order.')
    is_first = self._ended.copy()
    terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
    self._ended = terminated | truncated
    return self._frames(obs), np.asarray(reward), terminated, truncated, is_first

  def close(self) -> None:
    super().close()
    if self._env is not None:
      self._env.close()
      self._env = None
