"""Can S3TA learn where things are? A supervised probe on Pong frames, per optimizer setting.

The paper-size S3TA network regresses the agent's own paddle height (console RAM byte 51,
scaled to [-1, 1]) through its value head, from 210x160 RGB frames of random play, with the
learner's RMSProp and a loss summed over B x T like the IMPALA value loss. With a uniform
attention the answers carry no position, so the loss can only fall once the attention
localises the paddle; comparing optimizer settings on the same data shows which ones let it.

  python benchmarks/attention_probe.py --steps=250 \
      --settings="paper:0.01:1.0,catch_recipe:1e-4:0.0,resnet:0.01:1.0:2e-4:1:resnet_lstm"

`--downsample=2` mean-pools the frames to 105x80 (140 attention locations instead of 540);
`--keep=objects` blacks out the background, `--keep=paddle` everything but the paddle (white),
`--keep=difference` feeds |frame - its per-channel median| (the background at zero).

Each setting is NAME:EPSILON:INITIAL_MEAN_SQUARE[:LEARNING_RATE[:QUERY_INIT_SCALE[:KIND[:FIELD=VALUE...]]]]
(defaults: the paper's learning rate, query scale 1, 's3ta'); each FIELD=VALUE sets one more
`NetworkConfig` field, e.g. `query_input_norm=True`. Prints, every `--report_every`
steps, the held-out R^2 of the paddle height and each head's mean largest attention weight.
"""

import argparse
import ast
import time

import s3ta  # noqa: F401  pylint: disable=unused-import  (rlax before TF)

import jax
import jax.numpy as jnp
import numpy as np
import optax

from experiments import atari_expert
from s3ta.envs import atari_ram
from s3ta.learning import LearnerConfig
from s3ta.learning.learner_core import make_optimizer
from s3ta.networks import make_network
from s3ta.networks.agent import AgentInput

PADDLE_Y = dict(atari_ram.FEATURES['Pong'])['player_y']  # the agent's paddle: RAM byte 51
PADDLE_COLOUR = (92, 186, 92)  # its RGB (the agent's score digits share it: hence the rows)
PLAY_FIELD_ROWS = (34, 194)  # between the walls
BACKGROUND_COLOUR = (144, 72, 17)


def random_play(num_sequences: int, length: int, seed: int, action_repeat: int):
  """[N, T] RGB frames and paddle heights from one stretch of random Pong play."""
  import ale_py  # pylint: disable=g-import-not-at-top
  ale = ale_py.ALEInterface()
  ale.setInt('random_seed', seed)
  ale.setFloat('repeat_action_probability', 0.0)
  ale.loadROM(ale_py.roms.get_rom_path('pong'))
  actions = ale.getMinimalActionSet()
  rng = np.random.default_rng(seed)
  frames, heights = [], []
  while len(frames) < num_sequences * length:
    if ale.game_over():
      ale.reset_game()
    action = actions[rng.integers(len(actions))]
    for _ in range(action_repeat):
      ale.act(action)
    frames.append(ale.getScreenRGB())
    heights.append(ale.getRAM()[PADDLE_Y])
  frames = np.stack(frames).reshape(num_sequences, length, 210, 160, 3)
  heights = np.asarray(heights, np.float32).reshape(num_sequences, length)
  return frames, heights


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--settings', default='paper:0.01:1.0,catch_recipe:1e-4:0.0')
  parser.add_argument('--steps', type=int, default=300)
  parser.add_argument('--batch_size', type=int, default=4)
  parser.add_argument('--unroll_length', type=int, default=20)
  parser.add_argument('--train_sequences', type=int, default=96)
  parser.add_argument('--test_sequences', type=int, default=16)
  parser.add_argument('--report_every', type=int, default=25)
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--downsample', type=int, default=1,
                      help='mean-pool the frames by this factor (2: 105x80, 14x10 = 140 locations)')
  parser.add_argument('--keep', choices=('all', 'objects', 'paddle', 'difference'), default='all',
                      help="'objects': the background black; 'paddle': only the agent's paddle, "
                           "white on black (the easiest case for attention); 'difference': "
                           '|frame - its per-channel median|')
  args = parser.parse_args()
  if args.downsample < 1 or 210 % args.downsample or 160 % args.downsample:
    parser.error(f'--downsample must divide 210 and 160 (1, 2, 5 or 10), got {args.downsample}')

  config = atari_expert.get_config()  # paper-size S3TA, paper learning rate and clipping
  frames, heights = random_play(args.train_sequences + args.test_sequences, args.unroll_length,
                                args.seed, config.env.frame_skip)
  if args.keep == 'paddle':  # the agent's green paddle in the play field, white; all else black
    paddle = (frames == PADDLE_COLOUR).all(-1)
    paddle[..., :PLAY_FIELD_ROWS[0], :] = paddle[..., PLAY_FIELD_ROWS[1]:, :] = False
    frames = np.repeat(paddle[..., None] * np.uint8(255), 3, axis=-1)
  elif args.keep == 'objects':  # walls, ball, paddles and scores on black
    frames = np.where((frames == BACKGROUND_COLOUR).all(-1, keepdims=True), np.uint8(0), frames)
  elif args.keep == 'difference':  # |frame - its per-channel median|: every object keeps a colour
    median = np.median(frames, axis=(2, 3), keepdims=True)
    frames = np.abs(frames.astype(np.int16) - median).astype(np.uint8)
  if args.downsample > 1:
    n, t, h, w, c = frames.shape
    k = args.downsample
    frames = frames.reshape(n, t, h // k, k, w // k, k, c).mean(axis=(3, 5)).round().astype(np.uint8)
  low, high = np.percentile(heights, 1), np.percentile(heights, 99)
  targets = np.clip(2 * (heights - low) / max(high - low, 1.0) - 1, -1, 1)
  print(f'{len(frames)} sequences of {args.unroll_length} steps; paddle byte {low:.0f}..{high:.0f} '
        f'-> [-1, 1], target std {targets.std():.3f}')
  n_train = args.train_sequences

  def inputs_of(index):
    obs = jnp.asarray(frames[index]).swapaxes(0, 1)  # [T, B, ...]
    time_steps, batch = obs.shape[:2]
    zeros = jnp.zeros((time_steps, batch), jnp.int32)
    first = jnp.zeros((time_steps, batch), bool).at[0].set(True)
    return AgentInput(obs, zeros, zeros.astype(jnp.float32), first), jnp.asarray(targets[index]).T

  def loss_fn(params, inputs, target, network):
    outputs, _ = network.unroll(params, inputs, network.initial_state(target.shape[1]))
    return 0.5 * jnp.sum(jnp.square(outputs.value - target)), outputs

  test_index = np.arange(n_train, len(frames))
  paper_learning_rate = config.learner.learning_rate
  for setting in args.settings.split(','):
    name, epsilon, initial_scale, *rest = setting.split(':')
    config.learner.learning_rate = float(rest[0]) if rest else paper_learning_rate
    config.learner.rmsprop_epsilon = float(epsilon)
    config.learner.rmsprop_initial_scale = float(initial_scale)
    config.network.query_init_scale = float(rest[1]) if len(rest) > 1 else 1.0
    config.network.kind = rest[2] if len(rest) > 2 else 's3ta'
    network_config = config.network.to_dict()
    for field in rest[3:]:
      key, value = field.split('=')
      network_config[key] = ast.literal_eval(value)
    network = make_network(network_config, 6, frames.shape[2:])
    transform = make_optimizer(LearnerConfig.from_dict(config.learner))  # the learner's own
    params = network.init(jax.random.PRNGKey(args.seed))
    opt_state = transform.init(params)

    @jax.jit
    def update(params, opt_state, inputs, target):
      (loss, _), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, inputs, target, network)
      updates, opt_state = transform.update(grads, opt_state, params)
      return optax.apply_updates(params, updates), opt_state, loss

    @jax.jit
    def evaluate(params, inputs, target):
      _, outputs = loss_fn(params, inputs, target, network)
      residual = jnp.mean(jnp.square(outputs.value - target))
      if outputs.attention is None:
        return 1 - residual / jnp.var(target), jnp.float32(jnp.nan)
      return 1 - residual / jnp.var(target), jnp.mean(jnp.max(outputs.attention, axis=(-2, -1)))

    uniform = 1 / np.prod(network.config.vision_shape(frames.shape[2:]))  # one attention weight
    rng = np.random.default_rng(args.seed)
    start = time.time()
    for step in range(args.steps + 1):
      if step % args.report_every == 0:
        r2, sharpness = evaluate(params, *inputs_of(test_index))
        print(f'{name:14s} step {step:4d}  held-out R^2 {float(r2):+.3f}  largest attention weight '
              f'{float(sharpness):.4f} (uniform {uniform:.4f})  {time.time() - start:5.0f} s', flush=True)
      if step < args.steps:
        params, opt_state, _ = update(params, opt_state,
                                      *inputs_of(rng.choice(n_train, args.batch_size, replace=False)))


if __name__ == '__main__':
  main()
