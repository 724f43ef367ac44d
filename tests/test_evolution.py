"""CMA-ES training of paper 004's agent: lockstep rollouts, seeds, the strategy's direction and
exact resume, units re-queued when a worker dies (stand-ins and a killed real process), the
controller's resume, and bad configs refused."""

import concurrent.futures as futures
import json
import os
import threading
import time

import jax
import numpy as np
import pytest

from experiments import attention_agent
from s3ta.envs import vision_tasks
from s3ta.evolution import cma_es, controller, dispatch, policy, rollouts
from s3ta.networks.attention_agent import AttentionAgentConfig


class CountingTask:
  """Stand-in task: an episode of seed s lasts s % 4 + 1 steps and pays 1 + output per step."""
  output_size = 1

  def __init__(self):
    self.left = 0

  def reset(self, seed):
    self.left = seed % 4 + 1
    return np.full((96, 96, 3), seed % 256, np.uint8)

  def step(self, output):
    self.left -= 1
    return vision_tasks.TaskStep(np.zeros((96, 96, 3), np.uint8), 1.0 + float(output[0]),
                                 self.left == 0)


def test_lockstep_rollouts_give_each_job_its_own_episode_and_candidate():
  agent = policy.FlatAgent(AttentionAgentConfig(num_actions=1))
  params = jax.tree_util.tree_map(np.zeros_like, agent.params(np.zeros(agent.size)))
  params['action']['bias'] = np.full(1, 50.0)  # tanh(50) = 1: candidate 1 earns 2 per step
  vectors = np.stack([np.zeros(agent.size), agent.vector(params)])
  jobs = [rollouts.Job(0, 3), rollouts.Job(1, 1), rollouts.Job(1, 6), rollouts.Job(0, 0),
          rollouts.Job(1, 7)]
  seen = []
  results = rollouts.play([CountingTask(), CountingTask()], agent, vectors, jobs,
                          observer=lambda index, image, step: seen.append((index, image[0, 0, 0])))
  np.testing.assert_array_equal(results.steps, [4, 2, 3, 1, 4])  # seed % 4 + 1
  np.testing.assert_allclose(results.returns, [4.0, 4.0, 6.0, 1.0, 8.0], atol=1e-5)
  first_images = {index: value for index, value in reversed(seen)}
  assert first_images == {0: 3, 1: 1, 2: 6, 3: 0, 4: 7}  # each episode starts from its reset frame


def test_seeds_repeat_per_generation_and_evaluation_seeds_are_never_trained_on():
  np.testing.assert_array_equal(controller.training_seeds(0, 4, 5), controller.training_seeds(0, 4, 5))
  assert not np.array_equal(controller.training_seeds(0, 4, 5), controller.training_seeds(0, 5, 5))
  assert controller.training_seeds(3, 0, 1000).max() < controller.evaluation_seeds(1)[0]
  units = controller.population_units(np.arange(10.0)[:, None], np.array([7, 8]), workers=2)
  rows = [u[0][:, 0].tolist() for u in units]  # two units per worker, every candidate once
  assert len(rows) == 4 and sum(rows, []) == list(range(10)) and {len(r) for r in rows} == {2, 3}
  assert all((u[1] == [7, 8]).all() for u in units)
  units = controller.evaluation_units(np.ones(3), np.arange(5), workers=2)
  assert [u[1].tolist() for u in units] == [[[0, 1]], [[2, 3, 4]]] and units[0][0].shape == (1, 3)
  # Fresh evaluation seeds: a block of their own per evaluation, all outside training's range.
  fresh = [set(controller.evaluation_seeds(16, e)) for e in (0, 1, 2, 100_000)]
  assert all(len(a & b) == 0 for i, a in enumerate(fresh) for b in fresh[i + 1:])
  assert min(min(f) for f in fresh) >= controller.TRAIN_SEED_RANGE
  assert max(max(f) for f in fresh) < 2**32  # VizDoom's seeds are unsigned 32-bit


def test_cma_es_climbs_fitness_and_resumes_exactly(tmp_path):
  target = np.linspace(-1, 1, 6)
  fitness = lambda xs: -((np.asarray(xs) - target) ** 2).sum(axis=1)  # maximised at target
  state = cma_es.new_state(np.zeros(6), 0.3, population=12, seed=3)
  for _ in range(60):
    candidates = np.asarray(state.strategy.ask())
    state = cma_es.tell(state, candidates, fitness(candidates))
  np.testing.assert_allclose(cma_es.centre(state), target, atol=0.05)
  assert state.best_fitness > -0.01
  state.counters['generation'] = 60
  cma_es.save(str(tmp_path), state, {})
  restored, payload = cma_es.restore(str(tmp_path))
  np.testing.assert_array_equal(payload['centre'], cma_es.centre(state))
  np.testing.assert_array_equal(np.asarray(restored.strategy.ask()), np.asarray(state.strategy.ask()))


@pytest.mark.parametrize('dimension, requested, used', [
    (10, 'pycma', 'csa'), (400, 'pycma', 'tpa'), (400, 'csa', 'csa'), (10, 'tpa', 'tpa')])
def test_the_step_size_rule_is_pycmas_choice_or_the_one_named(dimension, requested, used):
  state = cma_es.new_state(np.zeros(dimension), 0.1, population=8, seed=0, diagonal=True,
                           sigma_adaptation=requested)
  assert cma_es.settings(state.strategy) == dict(population_size=8, diagonal=True,
                                                 sigma_adaptation=used, mirrored=False)
  assert cma_es.resolved_sigma_adaptation(requested, dimension) == used
  # TPA spends the first two candidates of every generation after the first on the mirrored
  # pair mean +- shift along the last step of the mean; CSA samples all of them independently.
  fitness = lambda xs: -((np.asarray(xs) - 0.5) ** 2).sum(axis=1)
  for generation in range(3):
    mean = cma_es.centre(state)
    candidates = np.asarray(state.strategy.ask())
    mirrored = np.allclose(candidates[0] + candidates[1], 2 * mean, atol=1e-12)
    assert mirrored == (used == 'tpa' and generation > 0)
    state = cma_es.tell(state, candidates, fitness(candidates))
  with pytest.raises(ValueError, match=r"sigma_adaptation must be one of \('pycma', 'csa', "
                     r"'tpa'\), got 'msr'"):
    cma_es.new_strategy(np.zeros(3), 0.1, 4, 0, sigma_adaptation='msr')


@pytest.mark.parametrize('dimension, rule, pairs', [(400, 'tpa', 3), (10, 'csa', 4)])
def test_mirrored_sampling_pairs_every_candidate_with_its_mirror(dimension, rule, pairs):
  # Population 8: CSA samples 4 mirrored pairs; TPA's own pair (from generation 2 on) leaves
  # room for 3 more, and in generation 1 two independent candidates take its place.
  state = cma_es.new_state(np.zeros(dimension), 0.1, population=8, seed=0, diagonal=True,
                           mirrored=True)
  assert cma_es.settings(state.strategy) == dict(population_size=8, diagonal=True,
                                                 sigma_adaptation=rule, mirrored=True)
  assert cma_es.mirrored_pairs(8, rule) == pairs
  fitness = lambda xs: -((np.asarray(xs) - 0.5) ** 2).sum(axis=1)
  for generation in range(3):
    mean = cma_es.centre(state)
    candidates = np.asarray(state.strategy.ask())
    is_pair = [np.allclose(candidates[i] + candidates[i + 1], 2 * mean, atol=1e-12)
               for i in range(0, 8, 2)]
    tpa_pair = rule == 'tpa' and generation > 0
    # pycma mirrors the last candidates; TPA's pair, when there is one, comes first
    assert is_pair == ([tpa_pair] if rule == 'tpa' else [True]) + [True] * 3
    state = cma_es.tell(state, candidates, fitness(candidates))
  unmirrored = cma_es.new_state(np.zeros(dimension), 0.1, population=8, seed=0, diagonal=True)
  assert cma_es.settings(unmirrored.strategy)['mirrored'] is False
  candidates = np.asarray(unmirrored.strategy.ask())
  assert not np.allclose(candidates[6] + candidates[7], 2 * cma_es.centre(unmirrored))
  with pytest.raises(ValueError, match='population 3 has none'):
    cma_es.new_strategy(np.zeros(400), 0.1, 3, 0, mirrored=True)


def test_checkpoints_keep_the_newest_and_ignore_partial_files(tmp_path):
  state = cma_es.new_state(np.zeros(3), 0.1, population=4, seed=0)
  for generation in (1, 2, 3):
    state.counters['generation'] = generation
    cma_es.save(str(tmp_path), state, {}, keep=2)
  (tmp_path / 'checkpoints' / 'es_000004.pkl.tmp-123').write_bytes(b'half a pickle')
  assert [g for g, _ in cma_es.list_checkpoints(str(tmp_path))] == [2, 3]
  assert cma_es.restore(str(tmp_path))[0].counters['generation'] == 3
  (tmp_path / 'checkpoints' / 'es_000005.pkl').write_bytes(b'garbage')
  with pytest.raises(ValueError, match='cannot read evolution checkpoint .*es_000005.pkl'):
    cma_es.restore(str(tmp_path))


class InlineClient:
  """Stand-in worker: scores vectors by -|v - 0.5|^2 per seed, or fails on chosen calls."""

  def __init__(self, name, fail_calls=(), restartable=False):
    self.name, self.calls, self.fail_calls, self.restartable = name, 0, set(fail_calls), restartable

  def submit(self, vectors, seeds):
    self.calls += 1
    future = futures.Future()
    if self.calls in self.fail_calls:
      future.set_exception(ConnectionError('worker process died'))
    else:
      score = -((np.asarray(vectors) - 0.5) ** 2).sum(axis=1)
      future.set_result((np.repeat(score[:, None], seeds.shape[1], axis=1), 10 * seeds.size))
    return future

  def alive(self):
    return True

  def restart(self):
    return self.restartable


def _units(count):
  return [(np.full((1, 2), float(i)), np.array([[1, 2]])) for i in range(count)]


def test_a_dead_workers_unit_goes_to_the_others_and_the_death_is_counted():
  logs = []
  dead, alive = InlineClient('a', fail_calls={1}), InlineClient('b')
  dispatcher = dispatch.Dispatcher([dead, alive], log=logs.append)
  results = dispatcher.run(_units(5))
  assert [r[0][0, 0] for r in results] == [-2 * (i - 0.5) ** 2 for i in range(5)]
  assert dispatcher.deaths == 1 and dispatcher.live_workers == 1
  assert 'worker a lost (ConnectionError: worker process died)' in logs[0]
  restartable = InlineClient('c', fail_calls={1, 2}, restartable=True)
  dispatcher = dispatch.Dispatcher([restartable], log=logs.append)
  assert len(dispatcher.run(_units(2))) == 2 and dispatcher.deaths == 2
  assert dispatcher.live_workers == 1
  with pytest.raises(dispatch.NoWorkersLeft, match='every worker died'):
    dispatch.Dispatcher([InlineClient('d', fail_calls={1})], log=logs.append).run(_units(2))


def test_a_silent_worker_is_counted_dead_after_the_unit_timeout():
  class Silent(InlineClient):
    def submit(self, vectors, seeds):
      return futures.Future()  # never completes

  dispatcher = dispatch.Dispatcher([Silent('s'), InlineClient('b')], unit_timeout_s=0.3,
                                   log=lambda line: None)
  assert len(dispatcher.run(_units(3))) == 3
  assert dispatcher.deaths == 1


def _config(**overrides):
  config = attention_agent.get_config('take_cover')
  config.es.population_size = 6
  config.es.rollouts_per_candidate = 2
  config.task.max_steps = 30
  config.num_workers = 2
  config.envs_per_worker = 2
  config.evaluator.every_generations = 2
  config.evaluator.rollouts = 3
  config.checkpoint_minutes = 0.0
  for key, value in overrides.items():
    node = config
    *path, last = key.split('.')
    for part in path:
      node = node[part]
    node[last] = value
  return config


def test_a_killed_local_worker_process_is_restarted_and_the_generation_completes():
  config = _config(**{'task.max_steps': 200})
  clients = [dispatch.LocalWorkerClient(config.to_dict(), f'worker_{i}') for i in range(2)]
  try:
    victim = clients[0].pid()  # starts the process and its worker
    clients[1].pid()
    agent_size = policy.FlatAgent(policy.agent_config(config.agent, 1)).size
    units = [(np.zeros((2, agent_size)), np.array([[1, 2], [3, 4]])) for _ in range(4)]
    threading.Timer(1.0, os.kill, (victim, 9)).start()
    logs = []
    dispatcher = dispatch.Dispatcher(clients, log=logs.append)
    started = time.monotonic()
    results = dispatcher.run(units)
    assert all(r is not None and r[0].shape == (2, 2) for r in results)
    assert dispatcher.deaths == 1 and dispatcher.live_workers == 2, logs
    assert clients[0].pid() != victim
    # Zero parameters stay still: identical seeds give identical returns, on any worker.
    assert len({tuple(r[0].reshape(-1)) for r in results}) == 1
    assert time.monotonic() - started < 300
  finally:
    for client in clients:
      client.close(kill=True)


def _inline_dispatcher():
  return dispatch.Dispatcher([InlineClient('a'), InlineClient('b')], log=lambda line: None)


def test_the_starting_mean_has_its_own_seed_and_the_sampling_keeps_config_seed(tmp_path):
  logs = []

  def start_and_first_steps(name, **overrides):
    # pycma draws from numpy's global generator, seeded when a strategy is made: ask at once.
    state = controller.Controller(_config(**overrides), str(tmp_path / name), _inline_dispatcher(),
                                  log=logs.append, tensorboard=False).state
    return cma_es.centre(state), np.asarray(state.strategy.ask()) - cma_es.centre(state)

  sizes = policy.agent_config(_config().agent, vision_tasks.OUTPUT_SIZES['take_cover'])
  initial = {s: policy.FlatAgent(sizes, seed=s).initial for s in (0, 1)}
  assert not np.allclose(initial[0], initial[1])
  start0, steps0 = start_and_first_steps('seed0', seed=0)  # init_seed -1: config.seed
  start1, steps1 = start_and_first_steps('seed1', seed=1)
  swapped_start, swapped_steps = start_and_first_steps('swapped', seed=1, **{'es.init_seed': 0})
  np.testing.assert_array_equal(start0, initial[0])
  np.testing.assert_array_equal(start1, initial[1])
  np.testing.assert_array_equal(swapped_start, initial[0])  # seed 0's start ...
  np.testing.assert_allclose(swapped_steps, steps1, atol=1e-12)  # ... seed 1's draws
  assert not np.allclose(steps0, steps1)
  assert [line.rsplit(' ', 1)[-1] for line in logs] == ['0', '1', '0']  # '... mean of seed S'
  assert all('starting mean of seed' in line for line in logs)


def test_the_controller_resumes_where_it_stopped(tmp_path):
  straight = controller.Controller(_config(max_generations=4), str(tmp_path / 'straight'),
                                   _inline_dispatcher(), log=lambda line: None, tensorboard=False)
  summary = straight.run()
  assert summary.generations == 4 and summary.stop_reason == 'max_generations (4)'
  assert summary.final_eval_mean is not None
  first = controller.Controller(_config(max_generations=2), str(tmp_path / 'split'),
                                _inline_dispatcher(), log=lambda line: None, tensorboard=False)
  first.run()
  logs = []
  second = controller.Controller(_config(max_generations=4), str(tmp_path / 'split'),
                                 _inline_dispatcher(), log=logs.append, tensorboard=False)
  assert 'resumed at generation 2' in logs[0]
  second.run()
  np.testing.assert_array_equal(cma_es.centre(second.state), cma_es.centre(straight.state))
  records = [json.loads(line) for line in open(tmp_path / 'split' / 'metrics.jsonl')]
  learner = [r for r in records if r['label'] == 'learner']
  assert [r['param_version'] for r in learner] == [1, 2, 3, 4]
  assert all(b['train_seconds'] > a['train_seconds'] for a, b in zip(learner, learner[1:]))
  assert [r['param_version'] for r in records if r['label'] == 'evaluator'] == [2, 2, 4, 4]
  summary = json.load(open(tmp_path / 'split' / 'summary.json'))
  assert summary['generations'] == 4 and summary['worker_deaths'] == 0


def test_checkpoints_keep_the_mean_that_scored_best_in_evaluation_across_a_resume(tmp_path):
  overrides = {'evaluator.every_generations': 1, 'es.init_sigma': 0.5}
  controller.Controller(_config(max_generations=3, **overrides), str(tmp_path),
                        _inline_dispatcher(), log=lambda line: None, tensorboard=False).run()
  resumed = controller.Controller(_config(max_generations=6, **overrides), str(tmp_path),
                                  _inline_dispatcher(), log=lambda line: None, tensorboard=False)
  resumed.run()
  evaluations = [json.loads(line) for line in open(tmp_path / 'metrics.jsonl')]
  evaluations = [r for r in evaluations if r['label'] == 'evaluator']
  best = max(evaluations, key=lambda r: r['mean_return'])
  payload = cma_es.restore(str(tmp_path))[1]
  assert payload['best_eval_mean'] == best['mean_return']
  assert payload['best_eval_generation'] == best['param_version']
  # The kept vector is the one that earned that mean (the stand-in scores -|v - 0.5|^2).
  vector = payload['best_eval_vector']
  assert -((vector - 0.5) ** 2).sum() == pytest.approx(best['mean_return'])
  assert len({r['mean_return'] for r in evaluations}) > 1  # a choice was made among them


def test_evaluations_play_fresh_or_fixed_seeds_and_are_logged(tmp_path):
  class Recording(InlineClient):
    seen = []

    def submit(self, vectors, seeds):
      Recording.seen += [int(s) for s in np.asarray(seeds).reshape(-1)
                         if s >= controller.EVAL_SEED_OFFSET]  # evaluation episodes only
      return super().submit(vectors, seeds)

  first = controller.EVAL_SEED_OFFSET
  for mode, max_generations, expected in (('fresh', 2, range(6)), ('fresh', 4, range(6, 12)),
                                          ('fixed', 4, [0, 1, 2] * 3)):
    Recording.seen = []
    logs = []
    dispatcher = dispatch.Dispatcher([Recording('a'), Recording('b')], log=lambda line: None)
    controller.Controller(_config(max_generations=max_generations, **{'evaluator.seeds': mode}),
                          str(tmp_path / mode), dispatcher, log=logs.append,
                          tensorboard=False).run()
    # Fresh: generation 2 and the final evaluation, then (resumed) 4 and the final one, each
    # on its own block of 3 seeds; fixed: the same 3 seeds at generations 2, 4 and the end.
    assert sorted(Recording.seen) == sorted(first + s for s in expected)
    lines = [line for line in logs if 'evaluation at generation' in line]
    assert len(lines) == len(expected) // 3 and f'over 3 episodes, {mode} seeds' in lines[0]
  with pytest.raises(ValueError, match=r"evaluator.seeds must be one of \('fresh', 'fixed'\), "
                     r"got 'rotating'"):
    controller.validate_config(_config(**{'evaluator.seeds': 'rotating'}))


def test_a_generation_interrupted_after_ask_resumes_as_if_never_started(tmp_path):
  straight = controller.Controller(_config(max_generations=3), str(tmp_path / 'straight'),
                                   _inline_dispatcher(), log=lambda line: None, tensorboard=False)
  straight.run()
  calls = []
  stop_in_generation_2 = lambda: calls.append(1) or len(calls) >= 5  # after its ask
  interrupted = controller.Controller(_config(max_generations=3), str(tmp_path / 'split'),
                                      _inline_dispatcher(), log=lambda line: None,
                                      tensorboard=False)
  assert interrupted.run(should_stop=stop_in_generation_2).stop_reason == 'stopped (signal)'
  assert interrupted.state.counters['generation'] == 1
  resumed = controller.Controller(_config(max_generations=3), str(tmp_path / 'split'),
                                  _inline_dispatcher(), log=lambda line: None, tensorboard=False)
  assert resumed.run().generations == 3
  np.testing.assert_array_equal(cma_es.centre(resumed.state), cma_es.centre(straight.state))


def test_a_checkpoint_of_another_agent_is_refused(tmp_path):
  controller.Controller(_config(max_generations=1), str(tmp_path), _inline_dispatcher(),
                        log=lambda line: None, tensorboard=False).run()
  with pytest.raises(ValueError, match='has 3633 parameters, this config.s agent 2609'):
    controller.Controller(_config(**{'agent.top_k': 2}), str(tmp_path), _inline_dispatcher(),
                          log=lambda line: None, tensorboard=False)


@pytest.mark.parametrize('key, value, saved', [
    ('es.population_size', 8, 6), ('es.diagonal', True, False),
    ('es.sigma_adaptation', 'csa', "'tpa'"), ('es.mirrored', True, False)])
def test_a_resume_that_asks_for_another_strategy_is_refused(tmp_path, key, value, saved):
  controller.Controller(_config(max_generations=1), str(tmp_path), _inline_dispatcher(),
                        log=lambda line: None, tensorboard=False).run()
  with pytest.raises(ValueError, match=rf'made with {key}={saved}, this config asks for '
                     rf'{value!r}'):
    controller.Controller(_config(**{key: value}), str(tmp_path), _inline_dispatcher(),
                          log=lambda line: None, tensorboard=False)
  # The checkpoint's 'pycma' chose TPA (3,633 dimensions); asking for 'tpa' by name resumes.
  logs = []
  controller.Controller(_config(**{'es.sigma_adaptation': 'tpa'}), str(tmp_path),
                        _inline_dispatcher(), log=logs.append, tensorboard=False)
  assert 'resumed at generation 1' in logs[0]


@pytest.mark.parametrize('key, value, match', [
    ('task.name', 'pong', "Unknown task 'pong'"),
    ('task.modification', 'blob', "Unknown modification 'blob'"),
    ('es.population_size', 1, r'config.es.population_size must be an integer >= 2, got 1'),
    ('es.rollouts_per_candidate', 0, 'rollouts_per_candidate must be an integer >= 1, got 0'),
    ('num_workers', 0, r'config.num_workers must be an integer >= 1, got 0'),
    ('es.init_sigma', 0.0, 'init_sigma must be > 0'),
    ('es.init_seed', -2, r'config.es.init_seed must be an integer >= -1, got -2'),
    ('es.sigma_adaptation', 'msr', r"es.sigma_adaptation must be one of \('pycma', 'csa', "
                                   r"'tpa'\), got 'msr'"),
    ('unit_timeout_s', 0.0, 'config.unit_timeout_s must be > 0, got 0.0'),
    ('checkpoint_minutes', -1.0, 'config.checkpoint_minutes must be >= 0, got -1.0'),
    ('es.init_sigma', float('nan'), 'config.es.init_sigma must be a number, got nan'),
    ('agent.top_k', 600, r'top_k \(600\) must be <= the number of patches \(529\)'),
])
def test_bad_configs_are_named(key, value, match):
  with pytest.raises(ValueError, match=match):
    controller.validate_config(_config(**{key: value}))


def test_mirrored_sampling_needs_room_for_a_pair():
  with pytest.raises(ValueError, match=r'config.es.mirrored needs config.es.population_size >= 4 '
                     r'.*got 3'):
    controller.validate_config(_config(**{'es.mirrored': True, 'es.population_size': 3}))
  controller.validate_config(_config(**{'es.mirrored': True, 'es.population_size': 4}))


def test_the_2core_recipe_is_the_measured_budget_and_other_recipes_are_named():
  paper, two_core = attention_agent.get_config('take_cover'), attention_agent.get_config(
      'take_cover,2core')
  controller.validate_config(two_core)
  # BENCHMARKS.md's solved 2-core run: sep-CMA-ES, 96 x 1 rollout in mirrored pairs, 3 hours.
  assert (two_core.es.population_size, two_core.es.rollouts_per_candidate) == (96, 1)
  assert two_core.es.diagonal and two_core.es.mirrored and two_core.max_seconds == 10800
  assert two_core.evaluator.every_generations == 5
  # Everything else is 004's, as in the plain task.
  for field in ('agent', 'task'):
    assert two_core[field].to_dict() == paper[field].to_dict()
  assert (two_core.es.init_sigma, two_core.es.sigma_adaptation) == (0.1, 'pycma')
  assert (paper.es.population_size, paper.es.rollouts_per_candidate) == (256, 5)
  assert not (paper.es.diagonal or paper.es.mirrored)
  assert attention_agent.get_config('take_cover,paper').to_dict() == paper.to_dict()
  for bad in ('car_racing,2core', 'take_cover,fast', 'take_cover,2core,x'):
    with pytest.raises(ValueError, match=rf"Unknown attention_agent recipe '{bad}'; valid: TASK "
                       r"or one of \('car_racing,paper', 'take_cover,paper', 'take_cover,2core'\)"):
      attention_agent.get_config(bad)
