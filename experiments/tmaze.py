"""The T-maze of paper 002 (`s3ta/envs/tmaze.py`) with PPO (002 Table 2) and a recurrent agent.

Usage:
  python -m launch.train_single --config=experiments/tmaze.py[:ARG] --workdir=DIR

ARG '' (default): the recurrent baseline, a small ResNet over the 5 x 5 view and an LSTM
of 32 units with the previous action and reward (002's baseline is a 2-layer LSTM(32)).
ARG 'attention': 002's attention-over-time agent, 4 heads (d_k 16, d_v 32) over the last
32 views (`s3ta/networks/time_attention.py`). The optimal figure 8 pays one reward per
20 steps: 10 per 200-step episode (9.8 from a random start). 002 does not state an episode
length or a start cell.

Four settings differ from the obvious reading, all measured (BENCHMARKS.md, T-maze):
- `env.start = 'random'`: a random walkable start cell per episode. Started at the bottom of
  the centre, agents learn the first reward and never the loop's far half (down a side,
  along the bottom, up the centre): 1.0-1.1 per episode. From random starts the first reward
  itself needs that half, and the LSTM learns the figure 8 (6.70 +- 0.29 over 3 seeds at 1 M
  steps, against 2.8 for the best policy without memory).
- `ppo.normalize_advantages = False`: with rewards this sparse, most minibatches hold no
  reward, and per-minibatch normalisation turns their value noise into unit-size policy
  steps; the policy collapses to a non-rewarding loop (return 0.0 from a random start).
- `ppo.entropy_cost = 0.001` (002 Table 2: 0.01): the LSTM reaches 7.84 +- 0.12 over 3 seeds
  at 1 M steps against 6.70 +- 0.29 with 0.01.
- `ppo.learning_rate = 1e-3` (002 Table 2: 2.5e-4), constant for the LSTM and annealed to 0
  at 1 M steps for the attention agent, with synchronous PPO (`single_machine.policy_lag =
  0`, as PPO is usually run): within 002's 1 M steps the LSTM walks the figure 8 (greedy,
  20 episodes: 9.50-9.75 on 5 seeds), the attention agent reaches 8.45 +- 0.32 over 5 seeds
  (greedy 7.9-9.75; one seed walks the figure 8); at 2.5e-4 the LSTM needed 1.8 M steps and
  the attention agent reached 6.2 +- 0.8 (3 seeds). A constant
  1e-3 made the attention agent unstable (5.2 at 1 M); annealed, one LSTM seed of three
  collapsed at 0.8 M (BENCHMARKS.md, T-maze at 1e-3). The anneal follows `max_frames`
  (`--config.max_frames=2000000` anneals over 2 M steps).
The attention agent's tokens are linear (`network.time_activation = 'none'`): with relu,
every PPO run ended with all 1,024 token units dead on every observation (a constant,
uniform policy), and leaky relu left 8 % of them ever positive. Likewise a dense layer of 64
units between the tokens and the heads (`network.time_hidden = 64`) ended with every relu unit
dead or every tanh unit saturated, at the random level (seed 0; BENCHMARKS.md, "a dense layer
before the heads"), so the tokens go straight into the heads. Beside the tokens
(`network.time_hidden_skip = True`) the units lived but the agent did no better (greedy
8.65-8.95 against 9.80 and 8.70 on seeds 0 and 1; BENCHMARKS.md, "beside its linear path"). Relu tokens after a LayerNorm
(`network.time_token_norm = 'layer'` or `'scale_only'`) did not die but went near constant
(0.2-0.9 % of the normed tokens' mean square varied with the view) and stayed at the random
level to 650 K steps (seeds 0 and 1; BENCHMARKS.md, "relu tokens after a LayerNorm"). Its window starts as blank
views before the episode's first (`env.frame_stack_fill = 'zeros'`): with 32 copies of the
first view, a blocked first move left the window unchanged and 12 of 140 greedy episodes
(7 seeds) froze for good; with blank views 1 of 140 did, and greedy returns went from
8.28 +- 0.54 to 9.18 +- 0.13 (training 8.42 -> 8.64; BENCHMARKS.md, T-maze routes).
PPO minibatches of shuffled steps (`ppo.minibatch_axis = 'samples'`, possible for this
feed-forward agent) instead of whole environments gave no gain over 7 seeds (8.56 +- 0.31
against 8.64 +- 0.11; BENCHMARKS.md, "T-maze attention agent, PPO minibatches"): kept off.
`ppo.value_cost = 1.0` is 002 Table 2's: 0.25 learned later and ended lower (6.20 +- 0.30 over
2 seeds), 2.0 no better (8.39 +- 0.36 over 4; BENCHMARKS.md, "the value-loss weight").
The attention agent discounts by `ppo.discount = 0.95` (002 Table 2: 0.99): over 9 seeds at
1 M steps, training 9.60 +- 0.13 against 9.28 +- 0.22 at 0.97 and 8.63 +- 0.12 at 0.99, greedy
(20 episodes) 9.66 +- 0.12 against 9.35 +- 0.23 and 9.20 +- 0.13, and 7 seeds of 9 at >= 9.5
greedy against 5 and 3 (BENCHMARKS.md, "the discount" and "discount 0.95"); seeds 9-16 gave 7
of 8 (14 of 17 in all, greedy 9.70 +- 0.08; "replicated on 8 new seeds"). A wasted step
costs 5 % of the next reward's value instead of 1 %; the effective horizon, about 20 steps, is
one loop. It leaves the random level a little later (median 478 K steps against 422 K at 0.97).
At 0.9 (horizon half a loop) it left it later still (median 791 K; one seed of six never) and
ended lower (6.69 +- 1.43 over seeds 0-5 against 9.51 +- 0.18; BENCHMARKS.md, "discount 0.9").
`env.route = 'any'` pays the T route (back along the top, down the centre and up) like the
figure 8; 'figure8' does not, and did not help the attention agent (same section).
"""

from experiments import atari_expert


def get_config(arg: str = ''):
  arg = (arg or '').strip()
  if arg not in ('', 'attention'):
    raise ValueError(f"Unknown tmaze argument {arg!r}; valid: ('', 'attention').")
  config = atari_expert.get_config('cpu')
  config.env.name = 'tmaze'
  config.env.max_steps = 200  # steps per episode
  config.env.start = 'random'  # a walkable cell per episode (002 names none); or 'centre'
  config.env.route = 'any'  # or 'figure8': only the figure 8's lower loop leads up the centre
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
    config.network.time_residual = True  # each view keeps its own values: not diluted 1:32
    config.network.time_activation = 'none'  # linear tokens: under relu all units died in PPO
    config.env.frame_stack = 32  # T: the views the agent attends over
    config.env.frame_stack_fill = 'zeros'  # blank views before the first: see the docstring
    config.ppo.discount = 0.95  # 002: 0.99; see the docstring

  config.single_machine.algorithm = 'ppo'
  config.unroll_length = 128  # horizon
  config.batch_size = 4  # one update per rollout of the 4 environments
  config.ppo.num_minibatches = 4  # of 1 env x 128 steps: 002's minibatch of 32 x 4 samples
  config.ppo.clip_epsilon = 0.2
  config.ppo.value_cost = 1.0
  config.ppo.max_abs_reward = 1.0
  config.ppo.normalize_advantages = False  # sparse rewards: see the docstring
  config.ppo.entropy_cost = 0.001  # 002: 0.01; see the docstring
  config.ppo.learning_rate = 1e-3  # 002: 2.5e-4; see the docstring
  config.single_machine.policy_lag = 0  # synchronous PPO: each rollout acts with the newest params

  config.max_frames = 1_000_000  # agent steps (no action repeat)
  if arg == 'attention':  # linear anneal to 0 over max_frames' updates (references: follow overrides)
    steps_per_update = config.get_ref('batch_size') * config.get_ref('unroll_length')  # 4 x 128
    config.ppo.learning_rate_decay_updates = atari_expert.updates_until_max_frames(
        config, steps_per_update)
  config.max_seconds = 3_600.0
  config.checkpoint_minutes = 10.0
  config.evaluator.period_s = 120.0
  config.evaluator.num_episodes = 4
  config.evaluator.num_envs = 4
  return config
