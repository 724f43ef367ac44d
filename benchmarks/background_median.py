"""What `subtract_background`'s median costs: XLA's sort (`jnp.median`) against the counting
search the network uses for uint8 frames (`agent.background_median`), in one process.

Times, interleaved so both variants see the same machine load: the median alone at the
actor's and the learner's frame counts, the network's jitted `step` at the actor's batch,
and the full `sgd_step` at the config's B x T. The sort variant is traced with
`jnp.median` in place of the counting median (both give the same numbers; tested in
tests/test_networks.py).

  python benchmarks/background_median.py --config=experiments/atari_fast.py:s3ta
"""

import argparse
import contextlib
import json
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.learner import synthetic_batch
from s3ta.analysis.parameter_counts import load_config
from s3ta.envs import factory
from s3ta.learning import LearnerConfig, init_training_state, make_sgd_step
from s3ta.networks import make_network
from s3ta.networks import agent as agent_lib


@contextlib.contextmanager
def median_as(kind: str):
  """Traces the network with the sort median ('sort') or the default counting one ('count')."""
  original = agent_lib.background_median
  if kind == 'sort':
    agent_lib.background_median = agent_lib.sort_median
  try:
    yield
  finally:
    agent_lib.background_median = original


def interleaved_ms(functions: dict, repeats: int) -> dict:
  """Median milliseconds per call of each nullary function, calls alternating between them."""
  for fn in functions.values():
    jax.block_until_ready(fn())  # compile
  times = {name: [] for name in functions}
  for _ in range(repeats):
    for name, fn in functions.items():
      start = time.perf_counter()
      jax.block_until_ready(fn())
      times[name].append(time.perf_counter() - start)
  return {name: round(1e3 * float(np.median(t)), 2) for name, t in times.items()}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--config', default='experiments/atari_fast.py:s3ta')
  parser.add_argument('--inference_batch', type=int, default=16,
                      help='environments per actor call (atari_fast: 32 envs in 2 groups)')
  parser.add_argument('--repeats', type=int, default=20)
  args = parser.parse_args()
  config = load_config(args.config)
  if not config.network.get('subtract_background'):
    raise SystemExit(f'{args.config} has network.subtract_background=False: no median to time.')
  num_actions, observation_shape = factory.env_spec(config.env)
  network = make_network(config.network.to_dict(), num_actions, observation_shape)
  learner_config = LearnerConfig.from_dict(config.learner.to_dict())
  state = init_training_state(network, learner_config, jax.random.PRNGKey(0))
  batch = synthetic_batch(network, config.unroll_length, config.batch_size)
  rng = np.random.default_rng(0)
  frames = {n: jnp.asarray(rng.integers(0, 256, (n,) + tuple(observation_shape), np.uint8))
            for n in (args.inference_batch, (config.unroll_length + 1) * config.batch_size)}
  step_input = jax.tree_util.tree_map(lambda x: x[0], network.dummy_input(1, args.inference_batch))
  step_input = step_input._replace(observation=frames[args.inference_batch])
  step_state = network.initial_state(args.inference_batch)

  functions = {}
  for kind in ('sort', 'count'):
    with median_as(kind):
      median = jax.jit(agent_lib.background_median)
      step = jax.jit(lambda *a: network.step(*a))  # a new function: traced afresh
      sgd_step = jax.jit(make_sgd_step(network, learner_config, jit=False))
      for n, f in frames.items():
        functions[f'median_{n}_frames/{kind}'] = (lambda m=median, f=f: m(f))
      functions[f'step_batch_{args.inference_batch}/{kind}'] = (
          lambda s=step: s(state.params, step_input, step_state))
      functions[f'sgd_step_{config.batch_size}x{config.unroll_length}/{kind}'] = (
          lambda s=sgd_step: s(state, batch))
      # Trace now, while the median is patched (jit traces on the first call).
      for name in [k for k in functions if k.endswith(kind)]:
        jax.block_until_ready(functions[name]())
  ms = interleaved_ms(functions, args.repeats)
  result = {'config': args.config, 'observation_shape': list(observation_shape),
            'device': str(jax.devices()[0]), 'platform': platform.machine(), 'ms': ms,
            'sort_over_count': {name[:-len('/sort')]: round(ms[name] / ms[name[:-4] + 'count'], 2)
                                for name in ms if name.endswith('/sort')}}
  print(json.dumps(result, indent=1))


if __name__ == '__main__':
  main()
