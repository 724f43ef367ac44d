"""Parameter counts of a config's networks by sub-network, beside paper 002's (Tables 3-4).

002 holds the number of parameters "approximately constant across our agent and
baselines for fair comparison"; this table shows how close a config's sizes come,
for any of the network kinds, on the config's own environment.
"""

import importlib.util
import os
from typing import Sequence

import jax

from s3ta.envs import factory
from s3ta.networks import NETWORK_KINDS, make_network, parameter_counts

# 002 Table 3 (feature-level Atari): inference, policy, value.
PAPER_002_ATARI = {'gawrl': ('attention', 131_712, 6_150, 1_025),
                   'cnn1d': ('convolutional', 125_184, 19_974, 3_329),
                   'mlp': ('fully-connected', 146_080, 198, 32)}
# 002 Table 4 (observation-level T-maze).
PAPER_002_TMAZE = {'time_attention': ('attention', 47_296, 5_125, 1_025),
                   'resnet_lstm': ('lstm', 42_560, 2_885, 577)}  # experiments/tmaze.py's LSTM


def default_kinds(config) -> str:
  """The kinds the papers compare on the config's environment, comma-separated."""
  return ('time_attention,resnet_lstm' if config.env.name == 'tmaze'
          else 'gawrl,dawrl,mlp,cnn1d,acnn')


def load_config(spec: str):
  """`path/to/config.py[:arg]` -> the ConfigDict its `get_config(arg)` returns."""
  path, _, arg = spec.partition(':')
  if not os.path.isfile(path):
    raise ValueError(f'--config file {path!r} does not exist (expected path/to/config.py[:arg]).')
  module_spec = importlib.util.spec_from_file_location('s3ta_analysis_config', path)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  if not callable(getattr(module, 'get_config', None)):
    raise ValueError(f'--config file {path!r} defines no get_config(); expected an experiment '
                     'config such as experiments/ram_features.py.')
  return module.get_config(arg) if arg else module.get_config()


def table(config, kinds: Sequence[str]) -> list[dict]:
  """One row per network kind: its counts on the config's environment and 002's."""
  unknown = [k for k in kinds if k not in NETWORK_KINDS]
  if unknown or not kinds:
    raise ValueError(f'unknown network kind(s) {unknown}; valid: {NETWORK_KINDS}.' if unknown else
                     f'--kinds names no network kind; valid: {NETWORK_KINDS}.')
  num_actions, observation_shape = factory.env_spec(config.env)
  paper = PAPER_002_TMAZE if config.env.name == 'tmaze' else PAPER_002_ATARI
  rows = []
  for kind in kinds:
    network = make_network(dict(config.network.to_dict(), kind=kind), num_actions,
                           observation_shape)
    shapes = jax.eval_shape(network.init, jax.random.PRNGKey(0))  # no arrays allocated
    counts = parameter_counts(shapes)
    name, *published = paper.get(kind, ('', None, None, None))
    rows.append(dict(kind=kind, **counts, total=sum(counts.values()), paper_model=name,
                     **{f'paper_{part}': n for part, n in zip(('inference', 'policy', 'value'),
                                                               published)}))
  return rows


def markdown(rows: list[dict], title: str) -> str:
  fmt = lambda n: '' if n is None else f'{n:,}'
  lines = [title, '', '| kind | inference | policy | value | total | 002: model | inference | '
           'policy | value |', '|---|---:|---:|---:|---:|---|---:|---:|---:|']
  for r in rows:
    lines.append(f"| {r['kind']} | {fmt(r['inference'])} | {fmt(r['policy'])} | {fmt(r['value'])} | "
                 f"{fmt(r['total'])} | {r['paper_model']} | {fmt(r['paper_inference'])} | "
                 f"{fmt(r['paper_policy'])} | {fmt(r['paper_value'])} |")
  return '\n'.join(lines)
