"""Atari from RAM features (papers 002 and 003): the feature agents trained with PPO.

Usage:
  python -m launch.train_single --config=experiments/ram_features.py[:GAME[,N]] --workdir=DIR \
      [--config.network.kind=mlp|gawrl|dawrl|cnn1d|acnn] [--config.network.awrl_attention=both|content|address]
      [--config.env.distractors=3 --config.env.distractor_policy=random|checkpoint \
       --config.env.distractor_checkpoint=WORKDIR_OF_A_RUN_ON_THE_GAME_ALONE]   # 003's distractor games
      [--config.env.random_kind=periodic]   # 003's slowly varying random features (002: uniform)

GAME: one of s3ta.envs.atari_ram.FEATURES (default Pong); N: random bytes appended as
irrelevant features (002: 0, 8, 32, 128). Observations are each feature's last 4
agent steps, in a feature order fixed per run (`env.feature_shuffle_seed`). PPO
settings are 002's Table 1: 8 environments, horizon 128, 3 epochs of 4 minibatches of
32 x 8 steps, Adam 2.5e-4, clip 0.2, GAE 0.95, gradient-norm clip 0.5, entropy 0.01,
value 0.5. g-AWRL adds a residual to its attention modules and normalises each channel over
a sample's tokens (below; neither is 003's). Its dense layer before its heads keeps 003's relu
(`network.awrl_hidden_activation`), although its pre-activations are mostly a per-unit
offset that no observation changes (on Pong at initialisation, 0.53 against a spread of
0.013 across observations): under relu PPO left 5 of its 64 units ever positive, under
tanh 90 % of (unit, observation) pairs were saturated by 1.1 M frames, and linear, the
offset became a constant logit bias (entropy 0.2 by 0.3 M frames); none learned within its
budget (BENCHMARKS.md, RAM-feature Pong). So here its input is centred and scaled
(`network.awrl_centre_tokens`: a mid-range observation's tokens are subtracted;
`network.awrl_norm_before_hidden`: then LayerNormed).

On CPU with the pinned jax 0.5, g-AWRL trains 1.3-1.45x faster under XLA's older CPU runtime:
`XLA_FLAGS=--xla_cpu_use_thunk_runtime=false` (newer XLA has no such flag and aborts on it).
`benchmarks/ram_noise.sh` runs the noisy conditions (distractor games, 32 random features)
that way, resumably, one core per queue (BENCHMARKS.md, "XLA:CPU's large buffers").
"""

from experiments import atari_expert
from s3ta.envs import atari_ram


def get_config(arg: str = ''):
  parts = [p.strip() for p in (arg or '').split(',') if p.strip()]
  game = parts[0] if parts else 'Pong'
  if game not in atari_ram.FEATURES or len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
    raise ValueError(f'Unknown ram_features argument {arg!r}; valid: GAME[,N] with GAME one of '
                     f'{tuple(sorted(atari_ram.FEATURES))} and N random features (an integer).')
  config = atari_expert.get_config('cpu')
  config.env.name = 'atari_ram'
  config.env.game = game
  config.env.light_observation = False  # unused: features, not frames
  config.env.ram_history = 4  # T (002 App. D)
  config.env.random_features = int(parts[1]) if len(parts) == 2 else 0
  config.env.num_envs = 4  # per env group / actor
  config.num_actors = 2  # 2 groups x 4 = 8 environments (002 Table 1: 8 actors)

  config.network.kind = 'mlp'  # FC baseline; 'gawrl'/'dawrl': 003's agents; 'cnn1d'/'acnn'
  # FC sized like g-AWRL on Pong (91.7 K vs 93.6 K inference parameters; 002 matches its
  # baselines' counts, Table 3, and its FC ends in 32 units): `python -m s3ta.analysis
  # parameter-counts --config=experiments/ram_features.py`. cnn1d's defaults match already.
  config.network.mlp_hidden = (288, 256, 32)
  # g-AWRL: subtract a mid-range observation's tokens before its dense layer, which otherwise
  # sees a per-unit offset that no observation changes, then scale what is left to O(1): centred
  # alone, its input moved 0.013 and 73 % of its units were dead by 0.75 M frames (awrl.py;
  # BENCHMARKS.md, RAM-feature Pong).
  config.network.awrl_centre_tokens = True
  config.network.awrl_norm_before_hidden = True
  # g-AWRL: with neither of these no run left Pong's random level (up to 7 M frames): its
  # maps start near uniform, so without a residual every token reads the same mixture (after
  # two modules a sample's tokens are one vector repeated), and a per-token norm keeps that
  # shared mixture. With both, seed 0 trained to -10.4 at 6.2 M frames, evaluation -7.75 (FC:
  # -18.0 there; seeds 1-2 slower; BENCHMARKS.md, "g-AWRL leaves the random level").
  config.network.awrl_residual = True
  config.network.awrl_norm_over = 'tokens'

  config.single_machine.algorithm = 'ppo'
  config.unroll_length = 128  # PPO horizon
  config.batch_size = 8  # one update per rollout of all 8 environments
  config.ppo.num_minibatches = 4  # of 2 environments x 128 steps (32 x 8)
  config.ppo.clip_epsilon = 0.2  # 002 Table 1
  config.ppo.learning_rate_decay_updates = 9766  # linear anneal to 0 at 1e7 agent steps

  config.max_frames = 40_000_000  # 1e7 agent steps (action repeat 4)
  config.max_seconds = 7_200.0
  config.checkpoint_minutes = 10.0
  config.evaluator.period_s = 300.0
  config.evaluator.num_episodes = 4
  config.evaluator.num_envs = 4
  return config
