"""The T-maze of paper 002 (`s3ta/envs/tmaze.py`) with PPO (002 Table 2) and a recurrent agent.

Usage:
  python -m launch.train_single --config=experiments/tmaze.py[:ARG] --workdir=DIR

ARG '' (default): the recurrent baseline, a small ResNet over the 5 x 5 view and an LSTM
of 32 units with the previous action and reward (002's baseline is a 2-layer LSTM(32)).
ARG 'attention': 002's attention-over-time agent, 4 heads (d_k 16, d_v 32) over the last
32 views (`s3ta/networks/time_attention.py`). The optimal figure 8 pays one reward per
20 steps: 10 per 200-step episode. 002 does not state an episode length. 1,000 steps give a
random walk more chances at the second reward (5 % of episodes against 0.1 % at 200), but
under them both agents collapsed before learning even the first (BENCHMARKS.md, T-maze).
"""

from experiments import atari_expert


def get_config(arg: str = ''):
  arg = (arg or '').strip()
  if arg not in ('', 'attention'):
    raise ValueError(f"Unknown tmaze argument {arg!r}; valid: ('', 'attention').")
  config = atari_expert.get_config('cpu')
  config.env.name = 'tmaze'
  config.env.max_steps = 200  # steps per episode
  config.env.start = 'centre'  # or 'random': a walkable cell per episode (002 names none)
  config.env.num_envs = 2  # per env group: 2 groups x 2 = 4 actors (002 Table 2)
  config.num_actors = 2

  config.network.kind = 'resnet_lstm'
  config.network.resnet_channels = (16,)  # 5x5 -> 3x3
  config.network.resnet_blocks = 1
  config.network.resnet_hidden = 32
  config.network.lstm_size = 32
  if arg == 'attention':
    config.network.kind = 'time_attention'
    config.network.time_hidden = 0  # the 32 tokens straight into the heads (002 Table 4)
    config.env.frame_stack = 32  # T: the views the agent attends over

  config.single_machine.algorithm = 'ppo'
  config.unroll_length = 128  # horizon
  config.batch_size = 4  # one update per rollout of the 4 environments
  config.ppo.num_minibatches = 4  # of 1 env x 128 steps: 002's minibatch of 32 x 4 samples
  config.ppo.clip_epsilon = 0.2
  config.ppo.value_cost = 1.0
  config.ppo.max_abs_reward = 1.0

  config.max_frames = 1_000_000  # agent steps (no action repeat)
  config.max_seconds = 3_600.0
  config.checkpoint_minutes = 10.0
  config.evaluator.period_s = 120.0
  config.evaluator.num_episodes = 4
  config.evaluator.num_envs = 4
  return config
