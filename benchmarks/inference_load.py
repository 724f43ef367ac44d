"""Load test of one central inference node on loopback: N simulated actors against it.

  python -m benchmarks.inference_load --config=experiments/atari_fast.py --actors=1,2,4,8,16 \
      --seconds=10 [--output=FILE.json]
  python -m benchmarks.inference_load --config=experiments/atari_expert.py --transport=direct \
      --config.env.backend=ale --config.env.num_envs=32 --actors=2,4,8,16   # GPU: batch 64-512

The node (`InferenceServer` behind a courier server, as in the distributed program)
runs in its own process; N actor threads in this process each send policy steps for
`config.env.num_envs` environments (random frames of the config's shape) as fast as
the node answers, for `--seconds` per N after `--warmup_seconds` of the same load unmeasured
(the node compiles one call per count of merged requests on `inference.merge_size`'s ladder;
the sizes compiled are reported). Reported per N: requests/s, environment frames/s served
(requests x envs x action repeat), actor requests per jitted call, and the call latency an
actor sees (mean, p50, p95). N and the time are bounded by
the flags; actors are threads, so the client side shares one Python interpreter.

`--transport=direct` runs the same node in this process and the actor threads call its
`step` directly: the node's queue, merge, jitted call on the device and split, without
courier's wire or a second process. It is what an accelerator node can serve before the
network, and it needs neither Launchpad nor courier (a lent GPU machine has neither).
"""

import json
import multiprocessing
import threading
import time

import numpy as np

from absl import app, flags
from ml_collections import config_flags

from launch import cli, config_checks  # neither imports Launchpad, Reverb or TensorFlow

_CONFIG = config_flags.DEFINE_config_file('config', None, 'Experiment config file.')
_ACTORS = flags.DEFINE_list('actors', ['1', '2', '4', '8', '16'], 'Simulated actor counts.')
_SECONDS = flags.DEFINE_float('seconds', 10.0, 'Measuring time per actor count.')
_WARMUP = flags.DEFINE_float('warmup_seconds', 5.0, 'Unmeasured load per actor count first '
                             '(compiles the merged calls).')
_WAIT_MS = flags.DEFINE_float('wait_ms', None, 'Batching window (default: the config\'s).')
_OUTPUT = flags.DEFINE_string('output', None, 'Also write the numbers as JSON here.')
_TRANSPORT = flags.DEFINE_enum('transport', 'courier', ['courier', 'direct'],
                               'courier: the node in its own process behind a courier server, as '
                               'in the program; direct: in this process, its `step` called directly.')

MAX_ACTORS = 64
MAX_SECONDS = 120.0


def _make_server(config, max_requests: int, wait_ms: float, should_stop):
  """An InferenceServer with fresh parameters of the config's network, on JAX's first device."""
  import jax  # pylint: disable=g-import-not-at-top
  from s3ta.acting.inference import InferenceServer  # pylint: disable=g-import-not-at-top
  from s3ta.envs import factory  # pylint: disable=g-import-not-at-top
  from s3ta.networks import make_network  # pylint: disable=g-import-not-at-top
  num_actions, shape = factory.env_spec(config.env)
  network = make_network(config.network.to_dict(), num_actions, shape)
  params = network.init(jax.random.PRNGKey(0))
  return InferenceServer(network, lambda: (0, params), rng_key=np.zeros(2, np.uint32),
                         max_requests=max_requests, wait_ms=wait_ms, should_stop=should_stop)


def _serve(config, max_requests: int, wait_ms: float, port_queue, stop_event) -> None:
  """The node process: an InferenceServer behind courier."""
  from launchpad.nodes.courier import courier_utils  # pylint: disable=g-import-not-at-top
  server = _make_server(config, max_requests, wait_ms, stop_event.is_set)
  courier_server = courier_utils.make_courier_server(server, port=None,
                                                     thread_pool_size=2 * MAX_ACTORS + 4)
  courier_server.Start()
  port_queue.put(courier_server.address)
  server.run()
  port_queue.put((server.total_requests, server.total_calls, sorted(server.call_sizes)))
  courier_server.Stop()


def _actor_loop(client, actor_id, slot, request, stop, latencies, counts):
  seq = 0
  while not stop.is_set():
    seq += 1
    start = time.perf_counter()
    client.step(actor_id, seq, request, False, seq == 1)
    latencies.append(time.perf_counter() - start)
    counts[slot] += 1


def _drive(clients, request, seconds: float, first_actor_id: int = 0):
  """One thread per client stepping as fast as the node answers: (latencies, counts, span)."""
  stop, latencies, counts = threading.Event(), [], [0] * len(clients)
  threads = [threading.Thread(target=_actor_loop,
                              args=(c, first_actor_id + i, i, request, stop, latencies, counts))
             for i, c in enumerate(clients)]
  start = time.time()
  for t in threads:
    t.start()
  time.sleep(seconds)
  stop.set()
  for t in threads:
    t.join(timeout=60)
  return latencies, counts, time.time() - start


def measure(make_client, config, num_actors: int, seconds: float, warmup_seconds: float) -> dict:
  """`make_client()`: an object with the node's `step` (a courier client, or the node itself).
  The same load runs first for `warmup_seconds` under other actor ids, unmeasured: the node
  compiles one call per merged batch size, and only concurrent actors make merges."""
  from s3ta.acting.policy import encode_arrays  # pylint: disable=g-import-not-at-top
  from s3ta.envs import factory  # pylint: disable=g-import-not-at-top
  num_actions, shape = factory.env_spec(config.env)
  envs = config.env.num_envs
  rng = np.random.default_rng(0)
  request = encode_arrays(dict(
      observation=rng.integers(0, 255, (envs, *shape)).astype(np.uint8),
      prev_action=rng.integers(0, num_actions, envs).astype(np.int32),
      prev_reward=np.zeros(envs, np.float32), is_first=np.zeros(envs, bool)))
  make_client().step(10_000, 1, request, False, True)  # the one-request call, compiled alone
  if warmup_seconds > 0:
    _drive([make_client() for _ in range(num_actors)], request, warmup_seconds, 10_001)
  latencies, counts, span = _drive([make_client() for _ in range(num_actors)], request, seconds)
  lat = np.asarray(latencies) * 1000
  requests = sum(counts)
  frames_per_step = int(config.env.frame_skip) if config.env.name == 'atari' else 1
  return dict(actors=num_actors, envs_per_actor=envs, requests_per_s=requests / span,
              frames_per_s=requests * envs * frames_per_step / span,
              latency_ms_mean=float(lat.mean()), latency_ms_p50=float(np.percentile(lat, 50)),
              latency_ms_p95=float(np.percentile(lat, 95)))


def _measure_courier(config, num_actors: int, wait_ms: float, seconds: float,
                     warmup_seconds: float) -> dict:
  """The node in its own process behind courier, as in the distributed program."""
  import courier  # pylint: disable=g-import-not-at-top
  context = multiprocessing.get_context('spawn')
  port_queue, stop_event = context.Queue(), context.Event()
  node = context.Process(target=_serve, args=(config, num_actors, wait_ms, port_queue, stop_event))
  node.start()
  try:
    address = port_queue.get(timeout=300)
    result = measure(lambda: courier.Client(address, call_timeout=300), config, num_actors, seconds,
                     warmup_seconds)
  finally:
    stop_event.set()
    requests, calls, call_sizes = port_queue.get(timeout=60)
    node.join(timeout=30)
    if node.is_alive():
      node.kill()
  result['requests_per_call'] = requests / max(calls, 1)  # warm-up calls included
  result['call_sizes'] = call_sizes  # the merged batch sizes compiled
  return result


def _measure_direct(config, num_actors: int, wait_ms: float, seconds: float,
                    warmup_seconds: float) -> dict:
  """The node's serving loop in a thread of this process; actors call its `step` directly."""
  stop = threading.Event()
  server = _make_server(config, num_actors, wait_ms, stop.is_set)
  loop = threading.Thread(target=server.run, name='inference-node', daemon=True)
  loop.start()
  try:
    result = measure(lambda: server, config, num_actors, seconds, warmup_seconds)
  finally:
    stop.set()
    loop.join(timeout=60)
  result['requests_per_call'] = server.total_requests / max(server.total_calls, 1)  # warm-up too
  result['call_sizes'] = sorted(server.call_sizes)
  result['device'] = str(server.device)
  return result


def main(argv):
  del argv
  config = _CONFIG.value
  counts = [int(n) for n in _ACTORS.value if n.strip().isdigit()]
  if not counts or len(counts) < len(_ACTORS.value) or min(counts) < 1 or max(counts) > MAX_ACTORS:
    cli.exit_error(f'--actors must be integers in [1, {MAX_ACTORS}], got {_ACTORS.value}.')
  if not 0 < _SECONDS.value <= MAX_SECONDS:
    cli.exit_error(f'--seconds must be in (0, {MAX_SECONDS:g}], got {_SECONDS.value}.')
  if not 0 <= _WARMUP.value <= MAX_SECONDS:
    cli.exit_error(f'--warmup_seconds must be in [0, {MAX_SECONDS:g}], got {_WARMUP.value}.')
  if _WAIT_MS.value is not None:
    config.inference.wait_ms = _WAIT_MS.value
  try:  # the window, and the rest of the config, before a network is built
    config_checks.validate_distributed(config)
  except ValueError as e:
    cli.exit_error(f'invalid config: {e}')
  wait_ms = config.inference.wait_ms
  results = []
  for n in counts:  # a fresh node per N: max_requests = N, as the program sets it
    if _TRANSPORT.value == 'direct':
      result = _measure_direct(config, n, wait_ms, _SECONDS.value, _WARMUP.value)
    else:
      result = _measure_courier(config, n, wait_ms, _SECONDS.value, _WARMUP.value)
    results.append(result)
    print(f"actors {n:3d}: {result['requests_per_s']:8.1f} requests/s, "
          f"{result['frames_per_s']:9.0f} frames/s, latency mean {result['latency_ms_mean']:.1f} ms, "
          f"p50 {result['latency_ms_p50']:.1f}, p95 {result['latency_ms_p95']:.1f}, "
          f"{result['requests_per_call']:.1f} requests per call, "
          f"{len(result['call_sizes'])} batch sizes compiled", flush=True)
  if _OUTPUT.value:
    with open(_OUTPUT.value, 'w') as f:
      json.dump(dict(window_ms=wait_ms, transport=_TRANSPORT.value, results=results), f, indent=1)


if __name__ == '__main__':
  flags.mark_flag_as_required('config')
  app.run(main, flags_parser=cli.parse_flags)
