"""Can the T-maze attention agent represent the figure 8? Behaviour cloning, no RL.

Plays the figure-8 expert of `tmaze_policies.py` (with `--epsilon` random actions, so
the data also holds states off its path) from random start cells, labels every step with
the expert's action, fits the agent's policy logits by cross-entropy (Adam), then plays
the greedy clone. A clone near the expert's 9.80 per 200-step episode shows the network
can hold the memory the task needs; a learner that stays far below it has an RL problem
(exploration, credit), not a capacity one. The agent sees its last T views, stacked as
`atari.FrameStack` stacks them (an episode's first view repeated to fill the stack).

  python benchmarks/tmaze_clone.py [--variants=default,relu,relu_no_residual,relu_newest,leaky_relu]
  python benchmarks/tmaze_clone.py --units=WORKDIR[,WORKDIR...]

Variants are overrides of `experiments/tmaze.py:attention`'s network config. `--units`
instead reads trained agents' newest checkpoints and reports, on the expert's observations,
the fraction of token units (all T tokens, before the activation) positive on any of them
(`dead_units.layer_activity`) and the spread of the logits and value across them: a run
whose units all died has constant outputs.
"""

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from experiments import tmaze as tmaze_config
from s3ta.envs import tmaze
from s3ta.analysis.rollout import restore_agent
from s3ta.networks import AgentInput, make_network
import dead_units
import tmaze_policies

VARIANTS = {'default': {}, 'relu': {'time_activation': 'relu'},
            'relu_no_residual': {'time_activation': 'relu', 'time_residual': False},
            'relu_newest': {'time_activation': 'relu', 'time_readout': 'newest'},
            'leaky_relu': {'time_activation': 'leaky_relu'}}
EPISODE_STEPS = 200


def _episode(maze: tmaze.TMaze, views: int, choose, rng: np.random.Generator):
  """Yields (stack [5, 5, 3 * views], expert action, reward) per step; `choose` picks the action played."""
  stack = np.concatenate([maze.observation()] * views, -1)
  last_side = None
  for _ in range(EPISODE_STEPS):
    opposite = lambda: (int(rng.choice((tmaze_policies.LEFT, tmaze_policies.RIGHT)))
                        if last_side is None else
                        tmaze_policies.RIGHT if last_side == tmaze_policies.LEFT else tmaze_policies.LEFT)
    expert = tmaze_policies.loop_action(maze, opposite)
    reward = maze.step(choose(stack, expert))
    yield stack, expert, reward
    if maze.position in (tmaze.LEFT_CORNER, tmaze.RIGHT_CORNER):
      last_side = tmaze_policies.LEFT if maze.position == tmaze.LEFT_CORNER else tmaze_policies.RIGHT
    stack = np.concatenate([stack[..., 3:], maze.observation()], -1)


def expert_data(episodes: int, views: int, epsilon: float, seed: int):
  rng = np.random.default_rng(seed)
  play = lambda stack, expert: int(rng.integers(5)) if rng.random() < epsilon else expert
  steps = [(stack, expert) for _ in range(episodes)
           for stack, expert, _ in _episode(tmaze.TMaze('random', int(rng.integers(2**31))), views,
                                            play, rng)]
  return np.stack([s for s, _ in steps]), np.array([a for _, a in steps], np.int32)


def clone(overrides: dict, args) -> dict:
  network_config = tmaze_config.get_config('attention').network.to_dict()
  network_config.update(overrides)
  views = tmaze_config.get_config('attention').env.frame_stack
  network = make_network(network_config, 5, (5, 5, 3 * views))
  params = network.init(jax.random.PRNGKey(args.seed))

  def logits(params, stacks):
    n = stacks.shape[0]
    inputs = AgentInput(stacks[None], jnp.zeros((1, n), jnp.int32), jnp.zeros((1, n), jnp.float32),
                        jnp.zeros((1, n), bool))
    return network.unroll(params, inputs, network.initial_state(n))[0].logits[0]

  optimizer = optax.adam(args.learning_rate)

  @jax.jit
  def update(params, opt_state, stacks, actions):
    loss, grads = jax.value_and_grad(lambda p: optax.softmax_cross_entropy_with_integer_labels(
        logits(p, stacks), actions).mean())(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  greedy = jax.jit(lambda params, stacks: logits(params, stacks).argmax(-1))
  stacks, actions = expert_data(args.episodes, views, args.epsilon, args.seed)
  held_stacks, held_actions = expert_data(args.episodes // 10, views, args.epsilon, args.seed + 1)
  start, rng, opt_state = time.time(), np.random.default_rng(args.seed), optimizer.init(params)
  for _ in range(args.steps):
    batch = rng.integers(len(stacks), size=args.batch_size)
    params, opt_state, loss = update(params, opt_state, stacks[batch], actions[batch])
  accuracy = np.mean(np.concatenate([np.asarray(greedy(params, held_stacks[i:i + 1000]))
                                     for i in range(0, len(held_stacks), 1000)]) == held_actions)
  play = lambda stack, expert: int(greedy(params, stack[None])[0])
  returns = [sum(r for _, _, r in _episode(tmaze.TMaze('random', 10_000 + e), views, play, rng))
             for e in range(args.test_episodes)]
  return dict(samples=len(stacks), final_loss=round(float(loss), 4),
              held_out_accuracy=round(float(accuracy), 3),
              greedy_return=round(float(np.mean(returns)), 2), seconds=round(time.time() - start))


def units(workdir: str, args) -> dict:
  """A trained agent's token units (`dead_units.layer_activity`) and output spread on the expert's play."""
  views = tmaze_config.get_config('attention').env.frame_stack
  agent = restore_agent(f'{workdir}/checkpoints', 5, (5, 5, 3 * views))
  stacks, _ = expert_data(args.episodes // 50, views, args.epsilon, args.seed + 2)
  n = stacks.shape[0]
  out = agent.network.unroll(agent.params, AgentInput(
      stacks[None], jnp.zeros((1, n), jnp.int32), jnp.zeros((1, n), jnp.float32),
      jnp.zeros((1, n), bool)), agent.network.initial_state(n))[0]
  (_, shape, ever, pairs, _), = [row for row in dead_units.layer_activity(agent, stacks)
                                 if row[0].startswith('torso/output')]
  return dict(workdir=workdir, activation=agent.network.config.time_activation,
              observations=n, units=int(np.prod(shape[1:])), units_ever_active=round(ever, 3),
              active_fraction=round(pairs, 4),
              logit_std=round(float(np.asarray(out.logits[0]).std(0).max()), 4),
              value_std=round(float(np.asarray(out.value[0]).std()), 4))


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--variants', default='default,relu')
  parser.add_argument('--episodes', type=int, default=250, help='expert episodes of 200 steps')
  parser.add_argument('--epsilon', type=float, default=0.25, help='random actions in the data')
  parser.add_argument('--steps', type=int, default=1500)
  parser.add_argument('--batch_size', type=int, default=128)
  parser.add_argument('--learning_rate', type=float, default=1e-3)
  parser.add_argument('--test_episodes', type=int, default=30)
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--units', default='', help='comma-separated workdirs: their units, no cloning')
  args = parser.parse_args()
  if args.units:
    for workdir in args.units.split(','):
      print(json.dumps(units(workdir, args)), flush=True)
    return
  for name in args.variants.split(','):
    if name not in VARIANTS:
      parser.error(f'unknown variant {name!r}; valid: {tuple(VARIANTS)}')
    print(json.dumps(dict(variant=name, overrides=VARIANTS[name], **clone(VARIANTS[name], args))),
          flush=True)


if __name__ == '__main__':
  main()
