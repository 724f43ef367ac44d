"""VizDoom's TakeCover as a paper-004 vision task, with modified variants built by rewriting its map.

The agent's one output in [-1, 1] moves left below -1/3, right above 1/3 and stays
otherwise (the world-models convention 004 follows). +1 per tic survived; an episode
ends at death or after `max_steps` tics (004: 2100). Frames are rendered at 160 x 120
with the status bar (004's agent attends to it) and resized to 96 x 96.

Modifications (004 section 5.5; the scenario's map is UDMF text, so they are edits of
it, written to a private copy of the WAD):
- higher_walls: the room's ceiling, and so its walls, twice as high (104 -> 208 units).
- floor_texture: the floor flat CRATOP1 replaced by GRASS1.
- hovering_text: a blue panel with white text over the top of the frame, above where
  monsters and fireballs appear.
- other_monster (ours): a DECORATE lump makes every spawned imp a cacodemon.
"""

import atexit
import functools
import os
import shutil
import struct
import tempfile

import numpy as np
from PIL import Image, ImageDraw
import vizdoom

from s3ta.envs import vision_tasks

SCENARIO = 'take_cover'
MOVE_THRESHOLD = 1.0 / 3.0
TEXT_PANEL = (24, 4, 136, 22)  # (left, top, right, bottom) in the 160 x 120 frame
TEXT = 'HOVERING TEXT'
_MAP_EDITS = {  # modification -> (old, new) replacements in the TEXTMAP lump
    'higher_walls': ('heightceiling = 104;', 'heightceiling = 208;'),
    'floor_texture': ('texturefloor = "CRATOP1";', 'texturefloor = "GRASS1";'),
}
_EXTRA_LUMPS = {'other_monster': ('DECORATE', b'actor TakeCoverCacodemon : Cacodemon replaces DoomImp {}\n')}


def read_wad(path: str) -> list:
  """[(lump name, bytes)] of a WAD file, in directory order."""
  with open(path, 'rb') as f:
    data = f.read()
  kind, count, directory = struct.unpack_from('<4sii', data, 0)
  if kind not in (b'IWAD', b'PWAD'):
    raise ValueError(f'{path} is not a WAD file (header {kind!r}).')
  lumps = []
  for i in range(count):
    offset, size, name = struct.unpack_from('<ii8s', data, directory + 16 * i)
    lumps.append((name.rstrip(b'\0').decode('ascii'), data[offset:offset + size]))
  return lumps


def write_wad(path: str, lumps: list) -> None:
  """Writes `lumps` as a PWAD: header, lump data, then the directory."""
  body, entries, offset = [], [], 12
  for name, data in lumps:
    entries.append(struct.pack('<ii8s', offset, len(data), name.encode('ascii')))
    body.append(data)
    offset += len(data)
  with open(path, 'wb') as f:
    f.write(struct.pack('<4sii', b'PWAD', len(lumps), offset))
    f.write(b''.join(body))
    f.write(b''.join(entries))


def modified_lumps(lumps: list, modification: str) -> list:
  """The scenario's lumps with `modification` applied; ValueError if the map lacks what it edits."""
  if modification in _MAP_EDITS:
    old, new = _MAP_EDITS[modification]
    edited = []
    for name, data in lumps:
      if name == 'TEXTMAP':
        text = data.decode('ascii')
        if old not in text:
          raise ValueError(f'take_cover.wad has no {old!r} to change for {modification!r}.')
        data = text.replace(old, new).encode('ascii')
      edited.append((name, data))
    return edited
  if modification in _EXTRA_LUMPS:
    return [_EXTRA_LUMPS[modification]] + list(lumps)
  return list(lumps)


@functools.lru_cache(maxsize=None)
def scenario_path(modification: str) -> str:
  """The WAD for `modification`: the packaged one, or a modified copy (one per process).

  The copy's temporary folder is removed when the process exits (it used to stay behind,
  one per evaluation or worker process).
  """
  original = os.path.join(vizdoom.scenarios_path, f'{SCENARIO}.wad')
  if modification not in _MAP_EDITS and modification not in _EXTRA_LUMPS:
    return original
  directory = tempfile.mkdtemp(prefix='s3ta_take_cover_')
  atexit.register(shutil.rmtree, directory, ignore_errors=True)
  path = os.path.join(directory, f'{SCENARIO}_{modification}.wad')
  write_wad(path, modified_lumps(read_wad(original), modification))
  return path


def draw_text_panel(frame: np.ndarray) -> np.ndarray:
  """`frame` (uint8 [120, 160, 3]) with the hovering-text panel drawn on it."""
  image = Image.fromarray(frame)
  draw = ImageDraw.Draw(image)
  draw.rectangle(TEXT_PANEL, fill=(0, 0, 200))
  draw.text((TEXT_PANEL[0] + 6, TEXT_PANEL[1] + 4), TEXT, fill=(255, 255, 255))
  return np.asarray(image)


def buttons(output: np.ndarray) -> list:
  """[MOVE_LEFT, MOVE_RIGHT] pressed for the agent's output."""
  value = float(np.asarray(output).reshape(-1)[0])
  return [int(value < -MOVE_THRESHOLD), int(value > MOVE_THRESHOLD)]


class TakeCoverTask:
  """One VizDoom TakeCover game; see the module docstring."""
  name = 'take_cover'
  output_size = 1

  def __init__(self, modification: str = 'none', *, max_steps: int = 2100):
    vision_tasks.validate(self.name, modification, max_steps)
    self.modification = modification
    game = vizdoom.DoomGame()
    game.load_config(os.path.join(vizdoom.scenarios_path, f'{SCENARIO}.cfg'))
    game.set_doom_scenario_path(scenario_path(modification))
    # VizDoom writes its settings file into the working directory unless told otherwise.
    game.set_doom_config_path(os.path.join(tempfile.gettempdir(), 's3ta_vizdoom.ini'))
    game.set_window_visible(False)
    game.set_sound_enabled(False)
    game.set_screen_resolution(vizdoom.ScreenResolution.RES_160X120)
    game.set_screen_format(vizdoom.ScreenFormat.RGB24)
    game.set_render_hud(True)
    game.set_episode_timeout(max_steps)
    game.set_mode(vizdoom.Mode.PLAYER)
    game.init()
    self._game = game
    self._last = np.zeros((vision_tasks.OBSERVATION_SIZE,) * 2 + (3,), np.uint8)

  def _observe(self) -> np.ndarray:
    state = self._game.get_state()
    if state is not None:  # None once the episode has ended: keep the last frame
      frame = state.screen_buffer
      if self.modification == 'hovering_text':
        frame = draw_text_panel(frame)
      self._last = vision_tasks.resize(frame)
    return self._last

  def reset(self, seed: int) -> np.ndarray:
    self._game.set_seed(int(seed) % (2 ** 31))
    self._game.new_episode()
    return self._observe()

  def step(self, output: np.ndarray) -> vision_tasks.TaskStep:
    reward = self._game.make_action(buttons(output))
    done = self._game.is_episode_finished()
    return vision_tasks.TaskStep(self._observe(), float(reward), bool(done))

  def close(self) -> None:
    self._game.close()
