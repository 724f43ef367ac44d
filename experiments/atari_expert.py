"""S3TA expert agent on one Atari game, distributed IMPALA (paper 000, Table 2 and App. A.1).

Usage:
  python -m launch.train --config=experiments/atari_expert.py[:ARG] --workdir=DIR \
      [--config.env.game=Breakout] [--config.num_actors=64] ...

ARG: '' (default) = the paper's agent: RGB 210x160 frames, Table 2 sizes, A.1
hyperparameters, learner on an accelerator; 'tuned' = the same agent with the five
changes that made it leave the random level on Pong (the only variant that did, one
seed on one H100: BENCHMARKS.md, "the value offset on Pong"): subtract_background,
key_norm, 32 key channels, RMSProp epsilon 1e-4 with the mean square from 0, and the
learned value offset; 'tuned_fast' = 'tuned' trained with the fast baseline's optimizer
and batch (B 8 x T 20, RMSProp lr 6e-4 annealed linearly to 0 at 10 M frames, global-norm
clip 40) on 128 environments in the single-machine trainer: training return +18.3 at
10 M frames in 10.5 minutes on one H200, 15 games of the final checkpoint +18.8 +- 0.4
(one seed; BENCHMARKS.md, "the fast optimizer on one H200"); 'resnet_fast' = the
ResNet-LSTM baseline with tuned_fast's batch, rate, clip and anneal but the paper's RMSProp
state (epsilon 0.01, mean square from 1.0) and no value offset, with which it learned where
tuned_fast's optimizer start kept it at random play: evaluation +11.1 at 10 M frames in 7.9
minutes on one H200 (one seed; BENCHMARKS.md, "the paper's optimizer start"); 'cpu' = the paper's agent
sized for a CPU-only machine (gray 84x84 frames, fewer actors, smaller batch); any other
word is an error. Variants are derived from the default below.
"""

from typing import Any

import ml_collections

VARIANTS = ('', 'tuned', 'tuned_fast', 'resnet_fast', 'cpu')


def get_config(arg: str = '') -> ml_collections.ConfigDict:
  arg = (arg or '').strip()
  if arg not in VARIANTS:
    raise ValueError(f'Unknown atari_expert variant {arg!r}; valid: {VARIANTS}.')
  config = ml_collections.ConfigDict()
  config.seed = 0  # seeds parameters, every actor's PRNG key and every env batch

  config.env = ml_collections.ConfigDict()  # s3ta/envs/factory.py
  config.env.name = 'atari'  # 'atari', 'catch' or 'atari_ram' (RAM features, papers 002/003)
  config.env.backend = 'envpool'  # Atari backend: 'envpool' or 'ale' (ale-py's vector env)
  config.env.game = 'Pong'  # game name (any of s3ta.envs.atari.available_games(backend))
  config.env.num_envs = 8  # environments per actor, stepped as one batch
  config.env.light_observation = False  # False: RGB 210x160x3 (paper); True: gray 84x84x1
  config.env.frame_stack = 1  # frames stacked along channels (recurrent agents need 1)
  config.env.frame_stack_fill = 'first'  # an episode's first stack: copies of its first frame, or 'zeros'
  config.env.full_action_space = False  # False: the game's minimal action set
  config.env.frame_skip = 4  # action repeat (A.1): frames per agent step
  config.env.max_episode_steps = 27_000  # agent steps before truncation (108 000 frames)
  config.env.noop_max = 30  # up to this many no-ops at episode start
  config.env.num_threads = 0  # EnvPool threads per actor (0: EnvPool's choice)
  config.env.ram_history = 4  # atari_ram: agent steps of each feature's history (T)
  config.env.random_features = 0  # atari_ram: random bytes appended as irrelevant features
  config.env.random_kind = 'uniform'  # atari_ram: 'uniform' bytes (002) or 'periodic' sines (003)
  config.env.feature_shuffle_seed = 0  # atari_ram: fixes the feature order for a run
  config.env.distractors = 0  # atari_ram: other instances of the game whose features are appended
  config.env.distractor_policy = ''  # atari_ram: who plays them ('random' | 'checkpoint')
  config.env.distractor_checkpoint = ''  # atari_ram: with 'checkpoint', a run trained on the game alone

  config.network = ml_collections.ConfigDict()  # passed to NetworkConfig.from_dict (Table 2)
  config.network.kind = 's3ta'  # s3ta | fixed_query | l2_keys | resnet | resnet_lstm
  config.network.conv_channels = (32, 64)  # vision ConvNet channels
  config.network.conv_kernels = (8, 4)  # its kernel sizes
  config.network.conv_strides = (4, 2)  # its strides (SAME): 210x160 -> 27x20
  config.network.vision_lstm_channels = 128  # ConvLSTM channels (keys + values)
  config.network.vision_lstm_kernel = 3  # ConvLSTM kernel size
  config.network.key_channels = 8  # key channels; values get the other 120
  config.network.num_heads = 4  # attention heads (queries)
  config.network.basis_frequencies = 4  # spatial basis (2*4)^2 = 64 channels
  config.network.query_hidden = (256, 128)  # query network MLP (output 4 x 72)
  config.network.query_input_norm = False  # LayerNorm the LSTM state before the query MLP
  config.network.key_norm = False  # LayerNorm each location's key channels (not the paper's;
  # True found Catch's ball 2.8x sooner; on Pong alone no effect in the probe's 2,600 updates
  # on a GPU nor in 7-9 M frames of RL; part of 'tuned': BENCHMARKS.md, "what makes S3TA's
  # attention start" and the "key_norm ... on Pong" and "supervised probe" sections)
  config.network.query_norm = False  # LayerNorm each head's query (not the paper's): a peaked
  # start instead of a uniform one, which on Pong's probe did not find the paddle either
  config.network.subtract_background = False  # subtract each frame's per-channel median before
  # the ConvNet (not the paper's): in Pong's supervised probe the attention then finds the paddle
  # (with key_norm: R2 0.99 after 225 updates at 105x80; at 210x160 0.95 after 400 updates at B 4
  # with key_channels=32) where it never did otherwise; in RL only with the value offset ('tuned')
  config.network.answer_hidden = (512, 256)  # answer processor MLP
  config.network.lstm_size = 256  # policy core LSTM
  config.network.head_hidden = 128  # MLP before policy and value heads
  config.network.mlp_hidden = (64, 64)  # 'mlp' (feature baseline): hidden layers
  config.network.awrl_heads = 4  # 'dawrl'/'gawrl' (paper 003): heads per attention module
  config.network.awrl_key_size = 32  # d_k = d_v
  config.network.awrl_model_size = 32  # per-token up-scaling output
  config.network.awrl_layers = 2  # attention modules
  config.network.awrl_position_size = 16  # sine-cosine address encoding (even)
  config.network.awrl_hidden = 64  # g-AWRL's fully connected layer before the heads (0: none, 002's read-out)
  config.network.awrl_hidden_activation = 'relu'  # its nonlinearity: 'relu', 'leaky_relu', 'tanh', 'none'
  config.network.awrl_centre_tokens = False  # g-AWRL: subtract a mid-range observation's tokens first
  config.network.awrl_norm_before_hidden = False  # g-AWRL: then LayerNorm them (scale to O(1))
  config.network.awrl_attention = 'both'  # queries/keys from 'both', 'content' or 'address'
  config.network.awrl_residual = False  # g-AWRL: each token adds its own embedding to its read
  config.network.awrl_norm_over = 'channels'  # g-AWRL's norms: per token, or per channel over 'tokens'
  config.network.cnn_channels = 32  # 'cnn1d' / 'acnn' (feature CNN baselines): filters each
  config.network.cnn_hidden = 64  # their dense layer before the heads
  config.network.time_heads = 4  # 'time_attention' (002's T-maze agent): heads over past views
  config.network.time_key_size = 16  # d_k
  config.network.time_value_size = 32  # d_v
  config.network.time_hidden = 64  # dense layer before the heads; 0: tokens straight in (002)
  config.network.time_hidden_activation = 'relu'  # that dense layer's nonlinearity (same choices)
  config.network.time_hidden_skip = False  # heads read the tokens beside that layer's units
  config.network.time_readout = 'all'  # heads read 'all' T tokens (002) or the 'newest' one
  config.network.time_activation = 'relu'  # tokens' nonlinearity: 'relu', 'leaky_relu', 'tanh', 'none'
  config.network.time_token_norm = 'none'  # before it: 'none', 'layer' or 'scale_only'
  config.network.time_previous_inputs = False  # previous action and reward into its heads too
  config.network.lstm_previous_inputs = True  # LSTM baselines: previous action and reward in
  config.network.time_residual = False  # add each view's own values to its read (residual)
  config.network.time_frame_channels = 3  # channels of one view in the frame stack
  config.network.dtype = 'float32'  # compute dtype ('bfloat16' for speed on accelerators)
  config.network.remat = False  # recompute core steps in backward (B 128 x T 50: XLA temp 65 -> 31 GiB)
  config.network.scan_unroll = 1  # core steps per scan-loop iteration (a speed knob; same numbers)

  config.learner = ml_collections.ConfigDict()  # passed to LearnerConfig.from_dict (A.1)
  config.learner.learning_rate = 2e-4  # RMSProp learning rate
  config.learner.learning_rate_decay_steps = 0  # learner steps of linear anneal to 0 (0: constant)
  config.learner.learning_rate_decay_begin = 0  # learner step where the anneal starts
  config.learner.rmsprop_epsilon = 0.01  # RMSProp epsilon (inside the square root)
  config.learner.rmsprop_decay = 0.99  # RMSProp decay
  config.learner.rmsprop_momentum = 0.0  # RMSProp momentum
  config.learner.rmsprop_initial_scale = 1.0  # initial mean square (TF1's RMSProp: 1.0)
  config.learner.entropy_cost = 0.01  # entropy regularisation weight
  config.learner.baseline_cost = 0.5  # value loss weight
  config.learner.discount = 0.99  # V-trace discount
  config.learner.max_abs_reward = 1.0  # rewards clipped to [-1, 1]
  config.learner.grad_clip = 1280.0  # gradient clip threshold
  config.learner.grad_clip_mode = 'element'  # element-wise clipping to [-1280, 1280]
  config.learner.max_nonfinite_in_a_row = 10  # halt after this many NaN/Inf updates (each skipped)
  # 0: off (the paper). > 0: a learned offset is added to the network's values; the baseline
  # loss is centred on each batch and its mean TD error goes into the offset (LearnerConfig).
  config.learner.value_offset_step_size = 0.0

  config.unroll_length = 50  # T: items hold T + 1 steps (one-step overlap)
  config.batch_size = 32  # B: trajectories per learner step
  config.num_actors = 64  # actor processes (each runs env.num_envs environments)
  config.queue_size = 128  # Reverb queue capacity in items; bounds actor run-ahead
  config.actor_max_in_flight_items = 8  # items an actor may have unconfirmed before it blocks
  config.param_refresh_steps = 20  # actor batch steps between parameter fetches
  config.param_timeout_s = 10.0  # courier call timeout for parameter fetches
  config.max_restarts = 5  # per actor/evaluator node: a dead worker process is restarted
  config.restart_backoff_s = 1.0  # first restart delay, doubled per restart (max 60 s)
  config.checkpoint_minutes = 10.0  # minutes between learner checkpoints (also saved at stop)
  config.max_frames = 200_000_000  # stop after the learner consumed this many frames (0: no limit)
  config.max_seconds = 0.0  # stop after this much learner wall time (0: no limit)
  config.max_learner_steps = 0  # stop after this many learner steps (0: no limit)
  config.log_period_s = 10.0  # seconds between metrics records of every node
  config.metrics_every_steps = 10  # learner fetches step metrics to the host this often (and per log)
  config.sample_timeout_ms = 1000  # learner waits this long for data before re-checking stop
  # Items the learner's Reverb sampler requests ahead of use (0: 2 x batch_size). Each is taken
  # from the queue early, so a full queue's items reach the learner this much later (policy lag).
  config.sampler_in_flight_samples = 0

  config.inference = ml_collections.ConfigDict()  # where actors' policy steps run (launch.train)
  config.inference.mode = 'auto'  # actor | central | auto (central iff the learner host has an accelerator)
  config.inference.num_nodes = 1  # central: inference nodes on the learner host (actor i -> node i % n)
  config.inference.max_requests = 0  # central: actor requests merged per call (0: all of a node's actors)
  config.inference.wait_ms = 2.0  # central: how long a call waits for more requests after the first
  config.inference.timeout_s = 30.0  # central: an actor's call timeout; it then retries
  config.inference.colocated = False  # central: serve from the learner process (no parameter copies)

  config.single_machine = ml_collections.ConfigDict()  # launch/train_single.py only
  config.single_machine.device = 'auto'  # auto | cpu | gpu | tpu: where policy and learner run
  config.single_machine.algorithm = 'impala'  # impala | ppo (then config.ppo, not config.learner)
  config.single_machine.num_envs = 0  # environments (0: num_actors * env.num_envs)
  config.single_machine.env_groups = 2  # env batches stepped in turn (one steps, one infers)
  config.single_machine.policy_lag = 1  # unrolls between acting and learning params (0: sync)
  config.single_machine.progress_period_s = 10.0  # seconds between progress lines
  config.ppo = ppo_defaults()

  config.evaluator = ml_collections.ConfigDict()
  config.evaluator.enabled = True  # run an evaluator node
  config.evaluator.period_s = 600.0  # seconds between evaluations
  config.evaluator.num_episodes = 10  # episodes per evaluation
  config.evaluator.num_envs = 5  # environments stepped together during evaluation
  config.evaluator.max_episode_steps = 27_000  # agent steps before an eval episode is cut
  config.evaluator.greedy = False  # False: sample actions like the actors; True: argmax

  config.resources = ml_collections.ConfigDict()  # cluster (Vertex AI) per-node resources
  config.resources.actor_cpu = 4  # vCPUs per actor
  config.resources.actor_memory_gib = 8  # memory per actor
  config.resources.learner_cpu = 8  # vCPUs of the learner host
  config.resources.learner_memory_gib = 64  # memory of the learner host
  config.resources.learner_accelerator = 'a100'  # xmanager ResourceType name, any case ('' for CPU)
  config.resources.learner_accelerator_count = 1  # accelerators of the learner
  config.resources.replay_cpu = 8  # vCPUs of the Reverb node
  config.resources.replay_memory_gib = 32  # memory of the Reverb node
  config.resources.evaluator_cpu = 4  # vCPUs of the evaluator
  config.resources.evaluator_memory_gib = 8  # memory of the evaluator
  config.resources.inference_cpu = 8  # vCPUs per central inference node (learner's accelerator type)
  config.resources.inference_memory_gib = 32  # memory per central inference node

  if arg in ('tuned', 'tuned_fast'):
    config.network.subtract_background = True
    config.network.key_norm = True
    config.network.key_channels = 32
    config.learner.rmsprop_epsilon = 1e-4
    config.learner.rmsprop_initial_scale = 0.0
    config.learner.value_offset_step_size = 0.1
  if arg == 'resnet_fast':  # the baseline; the paper's RMSProp state, which it needs here
    config.network.kind = 'resnet_lstm'
  if arg in ('tuned_fast', 'resnet_fast'):  # atari_fast.py's optimizer and batch, 10 M-frame anneal
    config.batch_size = 8
    config.unroll_length = 20
    config.learner.learning_rate = 6e-4
    config.learner.grad_clip = 40.0
    config.learner.grad_clip_mode = 'global_norm'
    config.max_frames = 10_000_000
    config.learner.learning_rate_decay_steps = updates_until_max_frames(config)  # 15,625 of 640 frames
    config.single_machine.num_envs = 128  # 2 groups of 64: 16 updates per unroll
  if arg == 'cpu':
    config.env.light_observation = True
    config.env.num_envs = 4
    config.num_actors = 2
    config.batch_size = 8
    config.unroll_length = 20
    config.queue_size = 32
    config.max_frames = 10_000_000
    config.evaluator.num_episodes = 2
    config.evaluator.num_envs = 2
    config.resources.learner_accelerator = ''
    config.resources.learner_accelerator_count = 0
  return config


def updates_until_max_frames(config: ml_collections.ConfigDict, frames_per_update=None) -> Any:
  """A reference to the updates that consume `config.max_frames`, rounded up, for a learning-rate
  anneal that ends with the run: it follows later overrides of its inputs, and an explicit value
  set on the anneal's own field replaces it. `frames_per_update` defaults to one IMPALA learner
  step's: frame skip x batch x unroll."""
  if frames_per_update is None:
    frames_per_update = (config.env.get_ref('frame_skip') * config.get_ref('batch_size') *
                         config.get_ref('unroll_length'))
  return (config.get_ref('max_frames') + frames_per_update - 1) // frames_per_update


def ppo_defaults() -> ml_collections.ConfigDict:
  """PPO settings (s3ta/learning/ppo.py), read when single_machine.algorithm = 'ppo'; paper 002
  Table 1 except the clip (0.1 here, 0.2 in 002)."""
  ppo = ml_collections.ConfigDict()
  ppo.learning_rate = 2.5e-4  # Adam
  ppo.learning_rate_decay_updates = 0  # linear anneal to 0 over this many updates (0: constant)
  ppo.adam_epsilon = 1e-5
  ppo.max_grad_norm = 0.5  # global-norm clipping
  ppo.clip_epsilon = 0.1  # probability-ratio (and value-change) clip
  ppo.clip_value = True
  ppo.gae_lambda = 0.95
  ppo.discount = 0.99
  ppo.epochs = 3  # passes over each rollout
  ppo.num_minibatches = 4  # minibatches per pass (must divide batch_size, or T x B for 'samples')
  ppo.minibatch_axis = 'envs'  # whole unrolls; 'samples': shuffled steps (feed-forward agents)
  ppo.entropy_cost = 0.01
  ppo.value_cost = 0.5
  ppo.max_abs_reward = 1.0  # rewards clipped to [-1, 1]
  ppo.normalize_advantages = True  # per minibatch
  ppo.max_nonfinite_in_a_row = 10  # halt after this many NaN/Inf minibatch steps (each skipped)
  return ppo
