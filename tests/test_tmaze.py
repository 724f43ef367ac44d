"""The T-maze of paper 002: hand-played sequences give the specified rewards and resets."""

import numpy as np
import pytest

from s3ta.envs import factory
from s3ta.envs.tmaze import BatchedTMaze, TMaze, walkable

NOOP, UP, RIGHT, DOWN, LEFT = range(5)


def _play(maze, moves):
  return [maze.step(a) for a in moves]


LEFT_LOOP_TO_CORNER = [UP] * 6 + [LEFT] * 4  # from the start: up the centre, left along the top
BACK_FROM_LEFT = [DOWN] * 6 + [RIGHT] * 4  # down the left side, right along the bottom
RIGHT_TURN = [UP] * 6 + [RIGHT] * 4
BACK_FROM_RIGHT = [DOWN] * 6 + [LEFT] * 4


def test_the_layout_is_a_figure_eight():
  grid = walkable()
  assert grid.shape == (7, 9) and grid.sum() == 9 * 2 + 5 * 3  # two rows, three columns inside
  assert grid[3, 0] and grid[3, 4] and grid[3, 8] and not grid[3, 2] and not grid[3, 6]


def test_the_optimal_figure_eight_pays_every_twenty_steps():
  maze = TMaze()
  rewards = _play(maze, LEFT_LOOP_TO_CORNER + BACK_FROM_LEFT + RIGHT_TURN + BACK_FROM_RIGHT +
                  LEFT_LOOP_TO_CORNER)
  assert [i for i, r in enumerate(rewards) if r] == [9, 29, 49] and sum(rewards) == 3.0
  assert maze.resets == 0


def test_the_wrong_reward_location_resets_and_a_figure_eight_rearms():
  maze = TMaze()
  first = _play(maze, LEFT_LOOP_TO_CORNER + BACK_FROM_LEFT + LEFT_LOOP_TO_CORNER)  # left twice
  assert sum(first) == 1.0 and maze.resets == 1 and not maze.armed
  # A figure 8 without reward (right, then left) arms the maze again, expecting the right.
  unrewarded = _play(maze, BACK_FROM_LEFT + RIGHT_TURN + BACK_FROM_RIGHT + LEFT_LOOP_TO_CORNER)
  assert sum(unrewarded) == 0.0 and maze.armed
  paid = _play(maze, BACK_FROM_LEFT + RIGHT_TURN)
  assert paid[-1] == 1.0 and sum(paid) == 1.0


def test_a_corner_entered_from_its_side_column_resets():
  maze = TMaze()
  rewards = _play(maze, [LEFT] * 4 + [UP] * 6)  # along the bottom, up the left side
  assert sum(rewards) == 0.0 and maze.resets == 1 and maze.position == (0, 0)


def test_shuttling_along_the_top_row_pays_nothing_and_returning_down_the_centre_pays():
  maze = TMaze()
  rewards = _play(maze, LEFT_LOOP_TO_CORNER + [RIGHT] * 8 + [LEFT] * 8 + [RIGHT] * 8)
  assert sum(rewards) == 1.0 and maze.resets == 0 and maze.position == (8, 0)
  # A dip into the centre column from the top row is not coming up it from its bottom.
  maze = TMaze()
  rewards = _play(maze, LEFT_LOOP_TO_CORNER + [RIGHT] * 4 + [DOWN, UP] + [RIGHT] * 4)
  assert sum(rewards) == 1.0 and maze.resets == 0
  # Back down the centre to its bottom and up again: as long as the figure 8, and paid.
  maze = TMaze()
  rewards = _play(maze, LEFT_LOOP_TO_CORNER + [RIGHT] * 4 + [DOWN] * 6 + RIGHT_TURN)
  assert [i for i, r in enumerate(rewards) if r] == [9, 29] and maze.resets == 0


T_ROUTE_RIGHT = [RIGHT] * 4 + [DOWN] * 6 + RIGHT_TURN  # from the left corner: the T route


def test_the_t_route_pays_like_the_figure_eight_unless_the_route_must_be_a_figure_eight():
  figure_eight = LEFT_LOOP_TO_CORNER + BACK_FROM_LEFT + RIGHT_TURN
  for route, t_route_paid in (('any', [9, 29]), ('figure8', [9])):
    maze = TMaze(route=route)
    assert [i for i, r in enumerate(_play(maze, figure_eight)) if r] == [9, 29]
    assert maze.events['centre_down'] == 0 and maze.events['reversal'] == 0
    maze = TMaze(route=route)
    rewards = _play(maze, LEFT_LOOP_TO_CORNER + T_ROUTE_RIGHT)
    assert [i for i, r in enumerate(rewards) if r] == t_route_paid and maze.resets == 0
    # Six moves down the centre and two reversals: at the left corner, at the centre's bottom.
    assert maze.events['centre_down'] == 6 and maze.events['reversal'] == 2
    assert maze.reversed_at == {(0, 0, RIGHT): 1, (4, 6, UP): 1}
  # Under 'figure8' a detour through the bottom row counts again: 22 steps for the reward.
  maze = TMaze(route='figure8')
  rewards = _play(maze, LEFT_LOOP_TO_CORNER + [RIGHT] * 4 + [DOWN] * 6 + [LEFT, RIGHT] + RIGHT_TURN)
  assert [i for i, r in enumerate(rewards) if r] == [9, 31]
  with pytest.raises(ValueError, match="Unknown tmaze route 'tee'; valid: \\('any', 'figure8'\\)"):
    TMaze(route='tee')
  with pytest.raises(ValueError, match="Unknown config.env.route 'tee'; valid"):
    factory.make_env({'name': 'tmaze', 'route': 'tee'}, 1, 0)


def test_stepping_back_into_the_corner_that_paid_is_neutral():
  maze = TMaze()
  rewards = _play(maze, LEFT_LOOP_TO_CORNER + [RIGHT, LEFT, DOWN, UP])  # out and back, twice
  assert sum(rewards) == 1.0 and maze.resets == 0 and maze.armed
  # The figure 8 still pays next, on the other side.
  assert _play(maze, BACK_FROM_LEFT + RIGHT_TURN)[-1] == 1.0
  # Coming up the centre and turning to the corner that just paid is the wrong location.
  assert sum(_play(maze, BACK_FROM_RIGHT + RIGHT_TURN)) == 0.0 and maze.resets == 1


def test_the_reward_corner_approached_up_its_side_column_resets():
  maze = TMaze()
  rewards = _play(maze, LEFT_LOOP_TO_CORNER + BACK_FROM_LEFT + [RIGHT] * 4 + [UP] * 6)
  assert sum(rewards) == 1.0 and maze.resets == 1 and maze.position == (8, 0)
  assert not maze.armed and maze.observation()[..., 1].sum() == 0  # no reward shown


def test_blocked_moves_and_noop_keep_the_position():
  maze = TMaze()
  assert _play(maze, [DOWN, LEFT, NOOP]) == [0.0, 0.0, 0.0]
  assert maze.position == (3, 6)  # down was blocked, left moved along the bottom row
  maze.step(UP)
  assert maze.position == (3, 6)  # (3, 5) is a wall


def test_each_step_is_tallied_as_one_event_per_episode():
  maze = TMaze()
  # A no-op, a blocked move, the reward on the left, then the left again (mistake 2).
  _play(maze, [NOOP, DOWN] + LEFT_LOOP_TO_CORNER + BACK_FROM_LEFT + LEFT_LOOP_TO_CORNER)
  assert maze.events['reward'] == 1 and maze.events['wrong_corner'] == 1
  assert maze.events['noop'] == 1 and maze.events['blocked'] == 1 and maze.events['move'] == 30
  assert maze.blocked_at == {(4, 6, DOWN): 1} and maze.events['reversal'] == 0
  # Disarmed: the figure 8 without reward (right, then left) is two disarmed corners.
  _play(maze, BACK_FROM_LEFT + RIGHT_TURN + BACK_FROM_RIGHT + LEFT_LOOP_TO_CORNER)
  assert maze.events['disarmed_corner'] == 2 and maze.armed
  # Armed for the right: entering it up its side column is mistake 1; walking on along the
  # top row into the left corner is neutral.
  _play(maze, BACK_FROM_LEFT + [RIGHT] * 4 + [UP] * 6 + [LEFT] * 8)
  assert maze.events['wrong_side'] == 1 and maze.events['neutral_corner'] == 1
  assert maze.resets == 2
  steps = 2 + 30 + 40 + 28
  assert maze.events['move'] + maze.events['blocked'] + maze.events['noop'] == steps
  assert sum(maze.events.values()) == steps + 6  # 1 reward, 2 mistakes, 2 disarmed, 1 neutral
  maze.reset()
  assert sum(maze.events.values()) == 0 and not maze.blocked_at
  _play(maze, [LEFT, DOWN, RIGHT, LEFT])  # a blocked move between does not hide a reversal
  assert maze.events['reversal'] == 2 and maze.events['move'] == 3
  assert maze.reversed_at == {(3, 6, RIGHT): 1, (4, 6, LEFT): 1}  # from where, which way
  _play(maze, [NOOP, UP, UP, LEFT, NOOP, DOWN])  # stalls of 3 (no-op, two ups into walls) and 2
  assert (maze.stall, maze.longest_stall) == (2, 3)


def test_finished_episodes_report_their_tallies():
  env = BatchedTMaze(2, max_steps=12)
  env.reset()
  for t in range(12):
    env.step(np.asarray([UP, LEFT] if t < 6 else [LEFT, DOWN]))
  finished = env.pop_finished_episodes()
  assert [episode.maze for episode in finished] == [0, 1] and env.pop_finished_episodes() == []
  (_, first, first_blocked, first_stall, _), (_, second, second_blocked, second_stall, _) = finished
  assert (first['reward'], first['move'], first['blocked']) == (1, 10, 2)
  assert first_blocked == {(0, 0, LEFT): 2}  # two more lefts in the corner
  assert (second['reward'], second['move'], second['blocked']) == (0, 4, 8)
  assert second_blocked == {(0, 6, LEFT): 2, (0, 6, DOWN): 6}  # in the bottom-left corner
  assert (first_stall, second_stall) == (2, 8)


def test_observation_shows_walls_the_agent_and_a_collectible_reward():
  maze = TMaze()
  frame = maze.observation()
  assert frame.shape == (5, 5, 3) and frame.dtype == np.uint8
  assert frame[2, 2, 2] == 255 and frame[..., 2].sum() == 255  # the agent, at the centre
  assert np.all(frame[3:, :, 0] == 255)  # below the bottom row: outside the grid
  assert frame[2, :, 0].tolist() == [0, 0, 0, 0, 0]  # the bottom row is open
  assert frame[0, 2, 0] == 0 and frame[0, 1, 0] == 255  # the centre column, walls beside it
  _play(maze, [UP] * 6 + [LEFT] * 2)  # at (2, 0): the left corner, 2 cells away, is visible
  frame = maze.observation()
  assert frame[2, 0, 1] == 255 and frame[..., 1].sum() == 255


def test_batched_episodes_end_after_max_steps_like_catch():
  env = BatchedTMaze(2, max_steps=12)
  env.reset()
  steps = [env.step(np.asarray([UP, LEFT] if t < 6 else [LEFT, LEFT])) for t in range(12)]
  assert [float(s.reward[0]) for s in steps].index(1.0) == 9
  assert steps[-1].last.tolist() == [True, True] and steps[-1].is_first.tolist() == [True, True]
  assert steps[-1].discount.tolist() == [0.0, 0.0]
  assert factory.env_spec({'name': 'tmaze'}) == (5, (5, 5, 3))
  with pytest.raises(ValueError, match='tmaze max_steps must be >= 1, got 0'):
    factory.make_env({'name': 'tmaze', 'max_steps': 0}, 1, 0)


def test_the_tmaze_config_builds_its_agent():
  from experiments import tmaze  # pylint: disable=g-import-not-at-top
  from s3ta.networks import make_network  # pylint: disable=g-import-not-at-top
  config = tmaze.get_config('')
  num_actions, shape = factory.env_spec(config.env)
  network = make_network(config.network.to_dict(), num_actions, shape)
  assert (num_actions, shape) == (5, (5, 5, 3)) and network.config.lstm_size == 32
  attention = tmaze.get_config('attention')
  assert factory.env_spec(attention.env) == (5, (5, 5, 96))  # 32 stacked views
  first = factory.make_env(attention.env, 1, 0).reset().observation[0]
  assert not first[..., :93].any() and first[2, 2, 95] == 255  # 31 blank views, then the agent
  assert make_network(attention.network.to_dict(), 5, (5, 5, 96)).config.kind == 'time_attention'
  with pytest.raises(ValueError, match="Unknown tmaze argument 'big'"):
    tmaze.get_config('big')


def test_random_starts_cover_the_maze_and_must_reach_the_centre_bottom_first():
  starts = {TMaze('random', seed).position for seed in range(200)}
  assert len(starts) == walkable().sum() and all(walkable()[y, x] for x, y in starts)
  env = BatchedTMaze(3, max_steps=4, seed=7, start='random')
  frames = {env.reset().observation.tobytes() for _ in range(10)}
  assert len(frames) > 1  # each reset draws new start cells
  # From the bottom of the left column: up its side to the reward corner is mistake 1 ...
  maze = TMaze('random', 0)
  maze.position, maze.via_centre = (0, 6), False
  assert sum(_play(maze, [UP] * 6)) == 0.0 and maze.resets == 1
  # ... and up the centre without having passed its bottom pays nothing.
  maze = TMaze('random', 0)
  maze.position, maze.via_centre = (4, 3), False
  assert sum(_play(maze, [UP] * 3 + [LEFT] * 4)) == 0.0 and maze.resets == 0
  # Along the bottom to the centre, then up and to a corner: the first reward.
  maze = TMaze('random', 0)
  maze.position, maze.via_centre = (0, 6), False
  assert _play(maze, [RIGHT] * 4 + LEFT_LOOP_TO_CORNER)[-1] == 1.0
  with pytest.raises(ValueError, match="Unknown config.env.start 'middle'; valid"):
    factory.make_env({'name': 'tmaze', 'start': 'middle'}, 1, 0)
  with pytest.raises(ValueError, match="Unknown tmaze start 'middle'"):
    TMaze('middle')


def test_the_attention_config_anneals_its_learning_rate_to_zero_at_max_frames():
  from experiments import tmaze  # pylint: disable=g-import-not-at-top
  lstm, attention = tmaze.get_config(''), tmaze.get_config('attention')
  assert (lstm.ppo.learning_rate, lstm.ppo.learning_rate_decay_updates) == (1e-3, 0)  # constant
  assert lstm.single_machine.policy_lag == attention.single_machine.policy_lag == 0
  assert attention.ppo.learning_rate_decay_updates == 1954  # ceil(1 M / (4 envs x 128 steps))
  attention.max_frames = 2_000_000  # as --config.max_frames=2000000 sets it
  assert attention.ppo.learning_rate_decay_updates == 3907


def test_a_zero_filled_window_changes_after_a_blocked_first_move():
  """With copies of the first view, a blocked first move leaves the whole window as it was
  (a greedy policy repeats it forever); with zeros the window still changes (`frame_stack_fill`)."""
  windows = {}
  for fill in ('first', 'zeros'):
    env = factory.make_env({'name': 'tmaze', 'frame_stack': 4, 'frame_stack_fill': fill}, 1, 0)
    first = env.reset().observation[0]
    env.send(np.asarray([DOWN]))  # the start cell (4, 6): down is a wall
    windows[fill] = (first, env.recv().observation[0])
  first, after = windows['first']
  np.testing.assert_array_equal(first, after)
  first, after = windows['zeros']
  view = first[..., 9:]  # the newest of the 4 views (3 channels each), oldest first
  assert not first[..., :9].any() and view[2, 2, 2] == 255  # three blank views, then the agent
  assert not after[..., :6].any()
  np.testing.assert_array_equal(after[..., 6:9], view)  # the start view, once more
  np.testing.assert_array_equal(after[..., 9:], view)
