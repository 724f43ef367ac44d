"""Load test of one central inference node on loopback: N simulated actors against it.

  python -m benchmarks.inference_load --config=experiments/atari_fast.py --actors=1,2,4,8,16 \
      --seconds=10 [--output=FILE.json]

The node (`InferenceServer` behind a courier server, as in the distributed program)
runs in its own process; N actor threads in this process each send policy steps for
`config.env.num_envs` environments (random frames of the config's shape) as fast as
the node answers, for `--seconds` per N. Reported per N: requests/s, environment
frames/s served (requests x envs x action repeat), actor requests per jitted call,
and the call latency an actor sees (mean, p50, p95). N and the time are bounded by
the flags; actors are threads, so the client side shares one Python interpreter.
"""

import json
import multiprocessing
import threading
import time

import numpy as np

from absl import app, flags
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file('config', None, 'Experiment config file.')
_ACTORS = flags.DEFINE_list('actors', ['1', '2', '4', '8', '16'], 'Simulated actor counts.')
_SECONDS = flags.DEFINE_float('seconds', 10.0, 'Measuring time per actor count.')
_WAIT_MS = flags.DEFINE_float('wait_ms', None, 'Batching window (default: the config\'s).')
_OUTPUT = flags.DEFINE_string('output', None, 'Also write the numbers as JSON here.')

MAX_ACTORS = 64
MAX_SECONDS = 120.0


def _serve(config, max_requests: int, wait_ms: float, port_queue, stop_event) -> None:
  """The node process: an InferenceServer with fresh parameters behind courier."""
  import jax  # pylint: disable=g-import-not-at-top
  from launchpad.nodes.courier import courier_utils  # pylint: disable=g-import-not-at-top
  from launch import program as program_lib  # pylint: disable=g-import-not-at-top
  from s3ta.acting.inference import InferenceServer  # pylint: disable=g-import-not-at-top
  from s3ta.envs import factory  # pylint: disable=g-import-not-at-top
  num_actions, shape = factory.env_spec(config.env)
  network = program_lib.build_network(config, num_actions, shape)
  params = network.init(jax.random.PRNGKey(0))
  server = InferenceServer(network, lambda: (0, params), rng_key=np.zeros(2, np.uint32),
                           max_requests=max_requests, wait_ms=wait_ms,
                           should_stop=stop_event.is_set)
  courier_server = courier_utils.make_courier_server(server, port=None,
                                                     thread_pool_size=2 * MAX_ACTORS + 4)
  courier_server.Start()
  port_queue.put(courier_server.address)
  server.run()
  port_queue.put((server.total_requests, server.total_calls))
  courier_server.Stop()


def _actor_loop(client, actor_id, request, stop, latencies, counts):
  seq = 0
  while not stop.is_set():
    seq += 1
    start = time.perf_counter()
    client.step(actor_id, seq, request, False, seq == 1)
    latencies.append(time.perf_counter() - start)
    counts[actor_id] += 1


def measure(address: str, config, num_actors: int, seconds: float) -> dict:
  import courier  # pylint: disable=g-import-not-at-top
  from s3ta.acting.policy import encode_arrays  # pylint: disable=g-import-not-at-top
  from s3ta.envs import factory  # pylint: disable=g-import-not-at-top
  num_actions, shape = factory.env_spec(config.env)
  envs = config.env.num_envs
  rng = np.random.default_rng(0)
  request = encode_arrays(dict(
      observation=rng.integers(0, 255, (envs, *shape)).astype(np.uint8),
      prev_action=rng.integers(0, num_actions, envs).astype(np.int32),
      prev_reward=np.zeros(envs, np.float32), is_first=np.zeros(envs, bool)))
  warm = courier.Client(address, call_timeout=300)
  for i in range(num_actors):  # compile every batch size the node will see
    for k in range(2):
      warm.step(10_000 + i, k + 1, request, False, k == 0)
  stop, latencies, counts = threading.Event(), [], [0] * num_actors
  clients = [courier.Client(address, call_timeout=60) for _ in range(num_actors)]
  threads = [threading.Thread(target=_actor_loop, args=(c, i, request, stop, latencies, counts))
             for i, c in enumerate(clients)]
  start = time.time()
  for t in threads:
    t.start()
  time.sleep(seconds)
  stop.set()
  for t in threads:
    t.join(timeout=60)
  span = time.time() - start
  lat = np.asarray(latencies) * 1000
  requests = sum(counts)
  frames_per_step = int(config.env.frame_skip) if config.env.name == 'atari' else 1
  return dict(actors=num_actors, envs_per_actor=envs, requests_per_s=requests / span,
              frames_per_s=requests * envs * frames_per_step / span,
              latency_ms_mean=float(lat.mean()), latency_ms_p50=float(np.percentile(lat, 50)),
              latency_ms_p95=float(np.percentile(lat, 95)))


def main(argv):
  del argv
  config = _CONFIG.value
  counts = [int(n) for n in _ACTORS.value]
  if not counts or min(counts) < 1 or max(counts) > MAX_ACTORS:
    raise app.UsageError(f'--actors must be integers in [1, {MAX_ACTORS}], got {_ACTORS.value}.')
  if not 0 < _SECONDS.value <= MAX_SECONDS:
    raise app.UsageError(f'--seconds must be in (0, {MAX_SECONDS:g}], got {_SECONDS.value}.')
  wait_ms = config.inference.wait_ms if _WAIT_MS.value is None else _WAIT_MS.value
  context = multiprocessing.get_context('spawn')
  results = []
  for n in counts:  # a fresh node per N: max_requests = N, as the program sets it
    port_queue, stop_event = context.Queue(), context.Event()
    node = context.Process(target=_serve, args=(config, n, wait_ms, port_queue, stop_event))
    node.start()
    try:
      address = port_queue.get(timeout=300)
      result = measure(address, config, n, _SECONDS.value)
    finally:
      stop_event.set()
      requests, calls = port_queue.get(timeout=60)
      result['requests_per_call'] = requests / max(calls, 1)  # warm-up calls included
      node.join(timeout=30)
      if node.is_alive():
        node.kill()
    results.append(result)
    print(f"actors {n:3d}: {result['requests_per_s']:8.1f} requests/s, "
          f"{result['frames_per_s']:9.0f} frames/s, latency mean {result['latency_ms_mean']:.1f} ms, "
          f"p50 {result['latency_ms_p50']:.1f}, p95 {result['latency_ms_p95']:.1f}, "
          f"{result['requests_per_call']:.1f} requests per call", flush=True)
  if _OUTPUT.value:
    with open(_OUTPUT.value, 'w') as f:
      json.dump(dict(window_ms=wait_ms, results=results), f, indent=1)


if __name__ == '__main__':
  flags.mark_flag_as_required('config')
  app.run(main)
