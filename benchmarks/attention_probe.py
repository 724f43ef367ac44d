"""Can S3TA learn where things are? A supervised probe on Pong frames, per optimizer setting.

The paper-size S3TA network regresses the agent's own paddle height (console RAM byte 51,
scaled to [-1, 1]) through its value head, from 210x160 RGB frames of random play, with the
learner's RMSProp and a loss summed over B x T like the IMPALA value loss. With a uniform
attention the answers carry no position, so the loss can only fall once the attention
localises the paddle; comparing optimizer settings on the same data shows which ones let it.
`--target` regresses another Pong RAM feature instead (`ball_y`, ...), or `return`: the
random policy's discounted return, which is what the RL value head has to fit first.

  python benchmarks/attention_probe.py --steps=250 \
      --settings="paper:0.01:1.0,catch_recipe:1e-4:0.0,resnet:0.01:1.0:2e-4:1:resnet_lstm"

`--downsample=2` mean-pools the frames to 105x80 (140 attention locations instead of 540);
`--keep=objects` blacks out the background, `--keep=paddle` everything but the paddle (white),
`--keep=difference` feeds |frame - its per-channel median| (the background at zero).

Each setting is NAME:EPSILON:INITIAL_MEAN_SQUARE[:LEARNING_RATE[:QUERY_INIT_SCALE[:KIND[:FIELD=VALUE...]]]]
(defaults: the paper's learning rate, query scale 1, 's3ta'); each FIELD=VALUE sets one more
`NetworkConfig` field, e.g. `query_input_norm=True`. Prints, every `--report_every`
steps, the held-out R^2 of the target and each head's mean largest attention weight.
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
from s3ta.learning.learner_core import make_optimizer, update_value_offset
from s3ta.networks import make_network
from s3ta.networks.agent import AgentInput

PONG_RAM = dict(atari_ram.FEATURES['Pong'])  # feature name -> console RAM byte
PADDLE_COLOUR = (92, 186, 92)  # its RGB (the agent's score digits share it: hence the rows)
PLAY_FIELD_ROWS = (34, 194)  # between the walls
BACKGROUND_COLOUR = (144, 72, 17)


def random_play(num_sequences: int, length: int, seed: int, action_repeat: int,
                discount: float, tail: int = 500):
  """[N, T] RGB frames, console RAM and discounted returns from one stretch of random Pong play.

  The return at a frame is what a value function under the random policy predicts there:
  the rewards that follow it, discounted. The stretch runs `tail` steps past the last frame
  kept, so that the last frames' returns see the points that follow them too.
  """
  import ale_py  # pylint: disable=g-import-not-at-top
  ale = ale_py.ALEInterface()
  ale.setInt('random_seed', seed)
  ale.setFloat('repeat_action_probability', 0.0)
  ale.loadROM(ale_py.roms.get_rom_path('pong'))
  actions = ale.getMinimalActionSet()
  rng = np.random.default_rng(seed)
  kept = num_sequences * length
  frames, ram, rewards = [], [], []
  while len(rewards) < kept + tail:
    if ale.game_over():
      ale.reset_game()
    action = actions[rng.integers(len(actions))]
    rewards.append(sum(ale.act(action) for _ in range(action_repeat)))
    if len(frames) < kept:
      frames.append(ale.getScreenRGB())
      ram.append(ale.getRAM())
  returns = np.zeros(len(rewards), np.float32)  # returns[i] = rewards[i + 1] + discount * ...
  for i in range(len(rewards) - 2, -1, -1):
    returns[i] = np.clip(rewards[i + 1], -1, 1) + discount * returns[i + 1]
  shape = (num_sequences, length)
  return (np.stack(frames).reshape(*shape, 210, 160, 3), np.stack(ram).reshape(*shape, -1),
          returns[:kept].reshape(shape))


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
  parser.add_argument('--target', choices=(*PONG_RAM, 'return'), default='player_y',
                      help="a Pong RAM feature to regress (player_y: the agent's paddle), or "
                           "'return': the random policy's discounted return, the value that "
                           'the IMPALA learner has to fit first')
  parser.add_argument('--target_mean', type=float, default=None,
                      help='shift the scaled targets to this mean (default: no shift); e.g. -2, '
                           "about the mean value of Pong's random policy, as the RL value head sees")
  parser.add_argument('--value_offset_step_size', type=float, default=0.0,
                      help="the learner's `value_offset_step_size`: the prediction is the value "
                           "head's output plus an offset that takes the batch's mean error, and "
                           'the loss is centred on the batch (0: off)')
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
  frames, ram, returns = random_play(args.train_sequences + args.test_sequences,
                                     args.unroll_length, args.seed, config.env.frame_skip,
                                     config.learner.discount)
  if args.target == 'return':
    heights, source = returns, f'discounted return (discount {config.learner.discount})'
  else:
    heights = ram[..., PONG_RAM[args.target]].astype(np.float32)
    source = f'{args.target} (RAM byte {PONG_RAM[args.target]})'
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
  if args.target_mean is not None:
    targets += args.target_mean - targets.mean()
  print(f'{len(frames)} sequences of {args.unroll_length} steps; {source} {low:.2f}..{high:.2f} '
        f'-> [-1, 1], target mean {targets.mean():+.3f}, std {targets.std():.3f}')
  n_train = args.train_sequences

  def inputs_of(index):
    obs = jnp.asarray(frames[index]).swapaxes(0, 1)  # [T, B, ...]
    time_steps, batch = obs.shape[:2]
    zeros = jnp.zeros((time_steps, batch), jnp.int32)
    first = jnp.zeros((time_steps, batch), bool).at[0].set(True)
    return AgentInput(obs, zeros, zeros.astype(jnp.float32), first), jnp.asarray(targets[index]).T

  centre = args.value_offset_step_size > 0

  def loss_fn(params, inputs, target, network, offset):
    """The summed squared error (centred on the batch with a value offset, as the learner's
    baseline loss is), its mean, and the outputs with the offset added to the values."""
    outputs, _ = network.unroll(params, inputs, network.initial_state(target.shape[1]))
    outputs = outputs._replace(value=outputs.value + offset)
    errors = target - outputs.value
    mean_error = jax.lax.stop_gradient(jnp.mean(errors))
    centred = errors - mean_error if centre else errors
    return 0.5 * jnp.sum(jnp.square(centred)), (outputs, mean_error)

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
    opt_state, offset = transform.init(params), jnp.float32(0)

    @jax.jit
    def update(params, opt_state, offset, step, inputs, target):
      (loss, (_, mean_error)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
          params, inputs, target, network, offset)
      updates, opt_state = transform.update(grads, opt_state, params)
      if centre:
        offset = update_value_offset(offset, mean_error, args.value_offset_step_size, step)
      return optax.apply_updates(params, updates), opt_state, offset, loss

    @jax.jit
    def evaluate(params, offset, inputs, target):
      """R^2, R^2 up to a constant (what the values get right whatever their level) and the
      heads' mean largest attention weight (NaN without attention)."""
      _, (outputs, _) = loss_fn(params, inputs, target, network, offset)
      residual = outputs.value - target
      r2, r2_shape = (1 - jnp.mean(jnp.square(residual)) / jnp.var(target),
                      1 - jnp.var(residual) / jnp.var(target))
      if outputs.attention is None:
        return r2, r2_shape, jnp.float32(jnp.nan)
      return r2, r2_shape, jnp.mean(jnp.max(outputs.attention, axis=(-2, -1)))

    uniform = 1 / np.prod(network.config.vision_shape(frames.shape[2:]))  # one attention weight
    rng = np.random.default_rng(args.seed)
    start = time.time()
    for step in range(args.steps + 1):
      if step % args.report_every == 0:
        r2, r2_shape, sharpness = evaluate(params, offset, *inputs_of(test_index))
        print(f'{name:14s} step {step:4d}  held-out R^2 {float(r2):+.3f} (up to a constant '
              f'{float(r2_shape):+.3f})  largest attention weight '
              f'{float(sharpness):.4f} (uniform {uniform:.4f})  {time.time() - start:5.0f} s', flush=True)
      if step < args.steps:
        params, opt_state, offset, _ = update(
            params, opt_state, offset, step, *inputs_of(rng.choice(n_train, args.batch_size, replace=False)))


if __name__ == '__main__':
  main()
