"""The fast CPU baseline on Atari: the Nature DQN torso (Mnih et al. 2015), sized for 2 cores.

Usage:
  python -m launch.train_single --config=experiments/atari_fast.py[:ARG] --workdir=DIR
  python -m launch.train --config=experiments/atari_fast.py[:ARG] --workdir=DIR

About 20 MFLOP per frame forward, 50x less than paper-size S3TA: on this 2-core
machine the learner consumes ~5.6 K frames/s (BENCHMARKS.md). Gray 84x84 frames;
otherwise IMPALA's Atari recipe: RMSProp (eps inside the root), entropy 0.01,
global-norm clipping at 40, discount 0.99, rewards clipped to [-1, 1].
ARG: '' (feed-forward, 4 stacked frames), 'lstm' (LSTM 256 with previous action
and reward, 1 frame) or 's3ta': the S3TA agent sized for these 2 cores (the paper's
ConvNet, an 11 x 11 ConvLSTM of 32 channels with 16 key channels, 4 heads) with
the settings that made paper-size S3TA leave Pong's random level on a GPU
(`atari_expert.py:tuned`: subtract_background, key_norm, the value offset) and
this file's optimizer and B 8 x T 20, its learning rate annealed linearly to 0 at
max_frames (10 M) (BENCHMARKS.md, "S3TA learns Pong on 2 CPU cores").
Derived from experiments/atari_expert.py.
"""

from experiments import atari_expert

VARIANTS = ('', 'lstm', 's3ta')


def get_config(arg: str = ''):
  arg = (arg or '').strip()
  if arg not in VARIANTS:
    raise ValueError(f'Unknown atari_fast variant {arg!r}; valid: {VARIANTS}.')
  config = atari_expert.get_config('cpu')
  config.env.game = 'Pong'
  config.env.light_observation = True  # gray 84x84
  config.env.frame_stack = 4 if arg == '' else 1  # the feed-forward torso sees 4 frames
  config.env.num_envs = 16  # per actor: 2 actors x 16 = 32 environments
  config.env.num_threads = 1  # emulator threads per env batch (2 cores in all)

  config.network.kind = {'': 'nature', 'lstm': 'nature_lstm', 's3ta': 's3ta'}[arg]
  config.network.nature_channels = (32, 64, 64)  # 84x84 -> 20x20 -> 9x9 -> 7x7
  config.network.nature_kernels = (8, 4, 3)
  config.network.nature_strides = (4, 2, 1)
  config.network.nature_hidden = 512
  config.network.lstm_size = 256  # 'lstm' and 's3ta' variants
  if arg == 's3ta':  # 84x84 -> 21x21 -> 11x11 locations (atari_expert's conv_* defaults)
    config.network.vision_lstm_channels = 32  # paper: 128; still 13.4 of ~19.5 M MACs per frame
    config.network.key_channels = 16  # and values 16 (+ the spatial basis)
    config.network.subtract_background = True
    config.network.key_norm = True
    config.learner.value_offset_step_size = 0.1

  config.learner.learning_rate = 6e-4  # RMSProp (IMPALA's Atari value); constant except in 's3ta'
  # Inside the root; losses are summed over T x B. At this network's gradient scale 0.01
  # damped the typical step ~3x; with 1e-4 and B 8 the distributed program reached +20
  # evaluation on Pong after 92 min on 2 cores (BENCHMARKS.md).
  config.learner.rmsprop_epsilon = 1e-4
  # TF1's start, as IMPALA: from 0 the first updates are ~10 x lr x sign(g) and after 32 of them
  # 13-26 % of the FC units are alive (from 1.0: 41-47 %). In launch.train this B 8 recipe from
  # 1.0 left random play at 6.7-7.8 M frames on seeds 0-2 (from 0: 7.8-8.2 M) and reached
  # evaluation >= +15 at 9.8-14.3 M frames, 48-67 min (from 0: 10.9-13.2 M); B 16 seeds 1 and 3
  # learned with it (random for 13.5 and 20 M frames from 0). launch.train_single from 1.0:
  # evaluation >= +15 at 12.9 and 10.1 M frames on seeds 0-1 (from 0: 11.7-15.3 M). BENCHMARKS.md.
  config.learner.rmsprop_initial_scale = 1.0  # initial mean square
  config.learner.entropy_cost = 0.01
  config.learner.grad_clip = 40.0  # global norm
  config.learner.grad_clip_mode = 'global_norm'

  config.unroll_length = 20  # T
  config.batch_size = 8  # B: four sgd steps per unroll of all 32 environments (more updates/frame)
  # B 32 (lr 1.2e-3): still random play at 13.7 K updates, 35 M frames, 147 min; B 16
  # (lr 8.5e-4): still random at 15.6 K updates, 20 M frames, 86 min. B 32 with entropy_cost
  # 0.0025 (0.01 / 4): seed 0 evaluation >= +15 at 64 min, 16.0 M frames; seeds 1 and 2 random to
  # about 20 M frames, and seed 1 with 0.001 too: one seed of three. B 16 with entropy_cost 0.005:
  # three seeds of three learned (evaluation >= +15 at 48-61 min, 12.9-17.6 M frames) in
  # launch.train_single; in launch.train two of four (evaluation >= +15 at 59 and 86 min; seed 1
  # random for 69 min, 13.5 M frames; seed 3 random to 20 M frames, 95 min); train_single seed 2
  # with the distributed lag (policy_lag 9) left random play 2.5 M frames later and climbed
  # slowly (training at most -4.5 by 17.4 M frames). With half the lag (queue_size 16,
  # actor_max_in_flight_items 0, sampler_in_flight_samples 1, param_refresh_steps 1) launch.train
  # seeds 1 and 3 left random play too; rmsprop_initial_scale 1.0 (see above) started both sooner.
  config.num_actors = 2  # actor processes (distributed); env groups (single machine)
  config.queue_size = 64  # Reverb queue items (distributed)
  config.actor_max_in_flight_items = 16  # one actor batch of items
  config.param_refresh_steps = 10  # actor batch steps between parameter fetches
  config.max_frames = 20_000_000  # learner-consumed frames
  config.max_seconds = 7_200.0  # two hours of learner wall time
  config.checkpoint_minutes = 10.0

  config.single_machine.env_groups = 2  # 2 x 16 envs: one group steps while the other infers
  config.single_machine.policy_lag = 1  # overlap acting with learning

  config.evaluator.period_s = 300.0  # evaluate every 5 minutes
  config.evaluator.num_episodes = 4  # full Pong games
  config.evaluator.num_envs = 4

  if arg == 's3ta':
    # The learning rate annealed linearly to 0 at max_frames, as IMPALA and S3TA trained. At a
    # constant 6e-4 all three seeds reached evaluations of +17.5 to +18.75 and fell back (training
    # at most +13.5); annealed, seed 0 reached training +19.2 at 8.8 M frames and held, 0.7-1.5 M
    # frames later to training 0 (BENCHMARKS.md, "annealed from the first step"). B 16 with lr
    # 8.5e-4 and entropy 0.005 learned too (seed 0) but later per frame, with a dip from +15 to +9,
    # for 8 % more frames/s: B 8 stays ("B 16 with half the entropy cost on the S3TA variant").
    config.max_frames = 10_000_000  # learner-consumed frames: 15,625 sgd steps of 640 frames
    config.max_seconds = 10_800.0  # 10 M frames in 100-108 min alone (1.55-1.7 K/s); 3 h if shared
    config.learner.learning_rate_decay_steps = atari_expert.updates_until_max_frames(config)
    config.learner.rmsprop_initial_scale = 0.0  # measured (three seeds) from 0; 1.0 not yet run
  return config
