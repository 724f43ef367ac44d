"""Paper 004's tasks: bad names refused, action mappings, episode rules, and each modification
visible in the frames (real CarRacing and VizDoom; the WAD edits checked lump by lump)."""

import os
import subprocess
import sys

import numpy as np
import pytest

from s3ta.envs import vision_tasks

car_racing = pytest.importorskip('s3ta.envs.car_racing')
take_cover = pytest.importorskip('s3ta.envs.take_cover')


@pytest.mark.parametrize('args, match', [
    (('pong',), "Unknown task 'pong'"),
    (('take_cover', 'vertical_bars'), "Unknown modification 'vertical_bars' for task 'take_cover'"),
    (('car_racing', 'none', -1), 'max_steps must be an integer >= 0'),
])
def test_bad_task_values_are_named(args, match):
  with pytest.raises(ValueError, match=match):
    vision_tasks.validate(*args)


def test_car_racing_maps_tanh_outputs_to_steer_gas_brake():
  np.testing.assert_allclose(car_racing.CarRacingTask.action(np.array([-1.0, -1.0, -1.0])), [-1, 0, 0])
  np.testing.assert_allclose(car_racing.CarRacingTask.action(np.array([1.0, 1.0, 1.0])), [1, 1, 1])
  np.testing.assert_allclose(car_racing.CarRacingTask.action(np.array([0.5, 0.0, -0.5])),
                             [0.5, 0.5, 0.25])


def test_take_cover_moves_only_beyond_a_third():
  assert take_cover.buttons(np.array([-0.5])) == [1, 0]  # MOVE_LEFT
  assert take_cover.buttons(np.array([0.3])) == [0, 0]  # stay
  assert take_cover.buttons(np.array([-0.3])) == [0, 0]
  assert take_cover.buttons(np.array([0.34])) == [0, 1]  # MOVE_RIGHT


def test_a_modified_scenario_is_deleted_when_its_process_exits():
  code = ('from s3ta.envs import take_cover; '
          'path = take_cover.scenario_path("higher_walls"); '
          'assert take_cover.read_wad(path) != take_cover.read_wad(take_cover.scenario_path("none")); '
          'print(path)')
  done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
  path = done.stdout.strip().splitlines()[-1]
  assert path.endswith('take_cover_higher_walls.wad')
  assert not os.path.exists(os.path.dirname(path))


def test_wad_round_trip_and_map_edits(tmp_path):
  original = take_cover.read_wad(take_cover.scenario_path('none'))
  path = str(tmp_path / 'copy.wad')
  take_cover.write_wad(path, original)
  assert take_cover.read_wad(path) == original
  textmap = lambda lumps: dict(lumps)['TEXTMAP'].decode()
  assert 'heightceiling = 104;' in textmap(original)
  walls = take_cover.modified_lumps(original, 'higher_walls')
  assert 'heightceiling = 208;' in textmap(walls) and 'heightceiling = 104;' not in textmap(walls)
  floor = take_cover.modified_lumps(original, 'floor_texture')
  assert 'texturefloor = "GRASS1";' in textmap(floor)
  monster = take_cover.modified_lumps(original, 'other_monster')
  assert monster[0][0] == 'DECORATE' and b'Cacodemon replaces DoomImp' in monster[0][1]
  assert monster[1:] == original


def _play(task, seed, outputs):
  frames, rewards = [task.reset(seed)], []
  for output in outputs:
    step = task.step(np.asarray(output, np.float32))
    frames.append(step.observation)
    rewards.append(step.reward)
    if step.done:
      break
  return frames, rewards


def test_take_cover_episodes_repeat_by_seed_pay_one_per_tic_and_stop_at_max_steps():
  task = vision_tasks.make_task('take_cover', max_steps=60)
  try:
    outputs = [[0.9 if (i // 10) % 2 else -0.9] for i in range(200)]
    frames, rewards = _play(task, 5, outputs)
    again, rewards_again = _play(task, 5, outputs)
    assert frames[0].shape == (96, 96, 3) and frames[0].dtype == np.uint8
    assert rewards == [1.0] * 60  # alive for the 60 tics the limit allows
    np.testing.assert_array_equal(frames[30], again[30])
    other, _ = _play(task, 6, outputs)  # another seed spawns the imps elsewhere
    assert not np.array_equal(frames[30], other[30])
  finally:
    task.close()


@pytest.mark.parametrize('modification', ['higher_walls', 'floor_texture', 'hovering_text',
                                          'other_monster'])
def test_take_cover_modifications_change_the_frame(modification):
  frames = {}
  for name in ('none', modification):
    task = vision_tasks.make_task('take_cover', name, max_steps=40)
    try:
      frames[name] = _play(task, 3, [[0.0]] * 40)[0][-1].astype(int)
    finally:
      task.close()
  changed = np.abs(frames[modification] - frames['none']).sum(-1) > 30
  assert changed.mean() > 0.005, f'{modification} changed {changed.mean():.3f} of the pixels'
  if modification == 'hovering_text':  # a blue panel in the top rows only
    rows = np.nonzero(changed.any(axis=1))[0]
    assert rows.max() < 20
    assert frames[modification][8, 48, 2] > 150 and frames[modification][8, 48, 0] < 60


def test_car_racing_modifications_and_episode_rules():
  plain = vision_tasks.make_task('car_racing', max_steps=30)
  bars = vision_tasks.make_task('car_racing', 'vertical_bars', max_steps=30)
  blob = vision_tasks.make_task('car_racing', 'background_blob', negative_reward_patience=12)
  colours = vision_tasks.make_task('car_racing', 'color_perturb', max_steps=30)
  try:
    still = [[0.0, -1.0, -1.0]] * 100  # no gas: no new tiles, -0.1 per step
    frames, rewards = _play(plain, 1, still)
    assert len(rewards) == 30  # max_steps
    frame = _play(bars, 1, still)[0][-1]
    assert (frame[:, :7] == 0).all() and (frame[:, -7:] == 0).all()
    assert not (frames[-1][:, :7] == 0).all()
    frames_blob, rewards_blob = _play(blob, 1, still)
    # The first step pays the starting tile; then 12 reward-less steps in a row end the episode.
    assert rewards_blob[0] > 0 and len(rewards_blob) == 13
    assert all(r < 0 for r in rewards_blob[1:])
    assert tuple(frames_blob[-1][36, 70]) == (255, 0, 0)
    # Red of a grass pixel (102 in both grass shades) once the opening zoom is over: shifted by
    # one draw of U[-51, 51] per episode.
    red = lambda f: int(f[10, 5, 0])
    reds = [red(_play(colours, seed, still)[0][3]) for seed in (1, 2)]
    assert abs(red(frames[3]) - 102) <= 3
    assert reds[0] != reds[1] and all(abs(r - 102) <= 52 for r in reds)
  finally:
    for task in (plain, bars, blob, colours):
      task.close()


def test_car_racing_fast_road_rendering_draws_gymnasiums_pixels():
  """The numpy ground renderer gives gymnasium's frames bit for bit while tiles change colour."""
  from gymnasium.envs.box2d import car_racing as gym_car_racing  # pylint: disable=g-import-not-at-top
  from s3ta.envs import car_racing  # pylint: disable=g-import-not-at-top
  reference, fast = gym_car_racing.CarRacing(continuous=True), car_racing._CarRacing(continuous=True)
  try:
    rng = np.random.default_rng(0)
    for seed in (0, 3):
      frames = [reference.reset(seed=seed)[0], fast.reset(seed=seed)[0]]
      assert np.array_equal(*frames)
      visited = 0.0
      for _ in range(80):  # gas and steering: the car turns and visits tiles (their colour changes)
        action = rng.uniform([-1.0, 0.3, 0.0], [1.0, 1.0, 0.1]).astype(np.float32)
        (expected, reward, *_), (frame, *_) = reference.step(action), fast.step(action)
        assert np.array_equal(frame, expected)
        visited += max(reward, 0.0)
      assert visited > 0  # tiles were visited, so recoloured tiles were drawn
  finally:
    reference.close()
    fast.close()
