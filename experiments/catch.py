"""Single-process S3TA on Catch: a small attention agent that learns in minutes on CPU.

Usage: python -m s3ta.train_local --config=experiments/catch.py[:kind]
where `kind` is any network kind (default 's3ta'), e.g. 'fixed_query' or 'resnet_lstm'.
"""

import ml_collections


def get_config(arg: str = 's3ta') -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.seed = 0  # seeds env, parameters and action sampling
  config.num_envs = 32  # environments stepped together
  config.unroll_length = 10  # T: each learner batch is [T + 1, num_envs]
  config.max_env_steps = 300_000  # agent steps over all envs before stopping
  config.return_window = 200  # training episodes in the running mean return
  config.eval_episodes = 200  # episodes of the final evaluation (0: none)
  config.log_every_seconds = 10.0  # progress line period

  config.env = ml_collections.ConfigDict()
  config.env.name = 'catch'  # the only single-process env
  config.env.rows = 10  # ball falls rows - 1 steps
  config.env.columns = 5  # paddle positions
  config.env.pixel_scale = 3  # observation is 30 x 15 x 3 (each cell 3x3 pixels)

  config.network = ml_collections.ConfigDict()
  config.network.kind = arg or 's3ta'  # s3ta | fixed_query | l2_keys | resnet | resnet_lstm
  config.network.conv_channels = (16,)  # one conv per grid cell: 30x15 -> 10x5 locations
  config.network.conv_kernels = (3,)  # kernel = cell size
  config.network.conv_strides = (3,)  # stride = cell size
  config.network.vision_lstm_channels = 32  # ConvLSTM channels (keys + values)
  config.network.vision_lstm_kernel = 3  # ConvLSTM kernel size
  config.network.key_channels = 8  # keys; values get the other 24
  config.network.num_heads = 4  # attention heads (as in the paper)
  config.network.basis_frequencies = 2  # 16 spatial basis channels
  config.network.query_hidden = (64,)  # query MLP
  config.network.answer_hidden = (128,)  # answer processor MLP
  config.network.lstm_size = 64  # policy LSTM
  config.network.head_hidden = 64  # MLP before policy/value heads
  config.network.query_init_scale = 1.0  # std multiplier of the query output init
  config.network.resnet_channels = (16, 16)  # used by the resnet kinds only
  config.network.resnet_blocks = 1
  config.network.resnet_hidden = 64

  config.learner = ml_collections.ConfigDict()
  config.learner.learning_rate = 1e-3  # larger than Atari's 2e-4: tiny net, dense rewards
  # Inside the square root (TF RMSProp). The paper's 0.01 barely normalises this tiny net's
  # small gradients (updates become SGD at lr*10) and attention never finds the ball.
  config.learner.rmsprop_epsilon = 1e-5
  config.learner.rmsprop_decay = 0.99
  config.learner.entropy_cost = 0.01
  config.learner.baseline_cost = 0.5
  config.learner.discount = 0.99
  config.learner.grad_clip = 1280.0  # element-wise, as in the paper
  config.learner.grad_clip_mode = 'element'
  return config
