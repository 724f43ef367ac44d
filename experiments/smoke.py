"""Smoke test of the distributed program: real EnvPool Pong, tiny S3TA, minutes on 2 CPU cores.

Usage (the README's main command):
  python -m launch.train --config=experiments/smoke.py --workdir=/tmp/s3ta_smoke

Derived from experiments/atari_expert.py: gray 84x84 frames, a tiny attention
agent, 2 actors x 4 envs, small unrolls and batches, a short frame budget.
ARG: '' (default) or 'test' (even shorter, for tests/test_distributed.py).
"""

from experiments import atari_expert


def get_config(arg: str = ''):
  arg = (arg or '').strip()
  if arg not in ('', 'test'):
    raise ValueError(f"Unknown smoke variant {arg!r}; valid: ('', 'test').")
  config = atari_expert.get_config('cpu')
  config.env.game = 'Pong'  # real EnvPool Pong
  config.env.num_envs = 4  # environments per actor
  config.env.light_observation = True  # gray 84x84x1 frames: cheap to emulate, send and learn
  config.env.num_threads = 1  # one EnvPool thread per actor (2-core machine)

  config.network.conv_channels = (8, 16)  # tiny vision ConvNet: 84x84 -> 21x21 -> 11x11
  config.network.vision_lstm_channels = 16  # tiny ConvLSTM
  config.network.key_channels = 4  # keys; values get the other 12
  config.network.num_heads = 2  # attention heads
  config.network.basis_frequencies = 2  # 16 basis channels
  config.network.query_hidden = (32,)  # query MLP
  config.network.answer_hidden = (64,)  # answer processor MLP
  config.network.lstm_size = 64  # policy LSTM
  config.network.head_hidden = 32  # MLP before the heads

  config.learner.learning_rate = 6e-4  # a little larger than A.1 for a tiny net

  config.unroll_length = 10  # T
  config.batch_size = 4  # B
  config.num_actors = 2  # actor processes
  config.queue_size = 16  # items
  config.actor_max_in_flight_items = 4  # one actor batch of items
  config.param_refresh_steps = 10  # fetch params every 10 batch steps
  config.param_timeout_s = 5.0  # courier timeout
  config.checkpoint_minutes = 1.0  # periodic checkpoint (plus one at stop)
  config.max_frames = 120_000  # learner-consumed frames (= 750 batches of 4 x 10 x 4)
  config.max_seconds = 75.0  # learner wall-time cap (after its own start-up)
  config.log_period_s = 5.0  # metrics records

  config.evaluator.period_s = 30.0  # evaluate every 30 s
  config.evaluator.num_episodes = 1  # one full episode (a lost Pong game: ~800 agent steps)
  config.evaluator.num_envs = 1  # one environment
  config.evaluator.max_episode_steps = 2500  # cut (and flag) longer evaluation episodes

  if arg == 'test':
    config.max_frames = 0  # no frame limit: stop on learner steps
    config.max_learner_steps = 60  # a visible number of batches, quickly
    config.max_seconds = 150.0  # guard only (60 steps take ~20-60 s on 2 busy cores)
    config.log_period_s = 2.0  # frequent records for assertions
    config.param_refresh_steps = 5  # params reach actors quickly
    config.evaluator.enabled = False  # keep the test small
  return config
