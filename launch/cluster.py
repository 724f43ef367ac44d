"""The Vertex AI launch (XManager through Launchpad 0.5.2): stage the code, submit or dry-run.

`launch(program, resources, dry_run)` hands the program to Launchpad's own Vertex AI
launcher. A dry run goes through the same code (node grouping into worker pools,
addresses, node serialisation, container specs) and stops at the one call that talks
to Google Cloud, `xm_local.create_experiment`: a recording experiment takes its place,
and what would have been submitted is printed instead.

Needs the `xmanager` package: `pip install -e .[cluster]` (pinned in setup.py).
"""

import atexit
import contextlib
import io
import os
import re
import shutil
import tempfile
from typing import Any

from s3ta.utils import storage

# What a node's container needs of this repository (no venv, no workdirs, no caches).
CODE_ENTRIES = ('s3ta', 'launch', 'experiments', 'setup.py', 'requirements.txt', 'README.md')
GPU_REQUIREMENT = 'jax[cuda12]==0.5.3'  # the `gpu` extra of setup.py, for accelerator pools


def stage_code(repo_root: str, destination: str) -> str:
  """Copies what the containers need of `repo_root` into `destination`; returns its path.

  Launchpad copies the whole code directory into every image, so it must not be the
  repository itself (its .venv alone is gigabytes).
  """
  os.makedirs(destination, exist_ok=True)
  ignore = shutil.ignore_patterns('__pycache__', '*.pyc')
  for entry in CODE_ENTRIES:
    source = os.path.join(repo_root, entry)
    target = os.path.join(destination, entry)
    if os.path.isdir(source):
      shutil.copytree(source, target, ignore=ignore, dirs_exist_ok=True)
    else:
      shutil.copy(source, target)
  with open(os.path.join(repo_root, 'requirements.txt')) as f:
    pins = f.read()
  with open(os.path.join(destination, 'requirements-gpu.txt'), 'w') as f:
    f.write(pins.rstrip('\n') + f'\n{GPU_REQUIREMENT}\n')
  return destination


class _RecordingExperiment:
  """Stands in for `xm_local.create_experiment(...)` in a dry run: records, submits nothing."""

  def __init__(self, experiment_title: str = ''):
    self.title = experiment_title
    self.job_groups = []

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    return False

  def package(self, packageables):
    # The launcher only hands what `package` returns to the jobs it `add`s: keep the specs.
    return [packageable.executable_spec for packageable in packageables]

  def add(self, job_group):
    self.job_groups.append(job_group)


@contextlib.contextmanager
def _recording(module):
  """Swaps `module.xm_local.create_experiment` for a recorder while the block runs."""
  recorders = []

  def create_experiment(experiment_title: str = ''):
    recorders.append(_RecordingExperiment(experiment_title))
    return recorders[-1]

  original = module.xm_local.create_experiment
  module.xm_local.create_experiment = create_experiment
  try:
    yield recorders
  finally:
    module.xm_local.create_experiment = original


def describe(experiment: _RecordingExperiment, node_mapping: list[str]) -> str:
  """The job a recording experiment saw: per worker pool its image, command and resources."""
  lines = [f'Vertex AI job {experiment.title!r} (dry run: nothing was built or submitted)']
  for group in experiment.job_groups:
    for pool, (name, job) in enumerate(group.jobs.items()):
      spec, executor = job.executable, job.executor
      requirements = executor.requirements
      lines.append(f'worker pool {pool} (job {name}): {requirements.replicas} replica(s), '
                   f'{_resources_text(requirements)}')
      lines.append(f'  image: FROM {spec.base_image}; build context {spec.path}; pip: '
                   f'{_requirements_text(spec.path)}')
      lines.extend(f'    {instruction}' for instruction in spec.docker_instructions)
      lines.append(f'  command: {" ".join(spec.entrypoint.commands)}')
  lines.append('nodes -> worker pools:')
  lines.extend(f'  {line}' for line in node_mapping)
  return '\n'.join(lines)


def _requirements_text(context: str) -> str:
  with open(os.path.join(context, 'requirements.txt')) as f:
    pins = [line for line in f.read().splitlines() if line and not line.startswith('#')]
  return f'{len(pins)} pinned packages' + (f' incl. {GPU_REQUIREMENT}' if GPU_REQUIREMENT in pins else '')


def _resources_text(requirements: Any) -> str:
  task = {str(getattr(k, 'name', k)).lower(): v
          for k, v in requirements.task_requirements.items()}
  memory = task.pop('memory', None)
  parts = [f'{k} {v:g}' for k, v in sorted(task.items())]
  if memory is not None:
    parts.append(f'memory {memory / 2**30:g} GiB')
  return ', '.join(parts)


def launch(program, resources: dict, *, dry_run: bool) -> str:
  """Launches `program` on Vertex AI, or (dry run) returns the description of what would be."""
  # Imported here: Launchpad reads its logging directory at import (launch/train.py), and
  # its xm_docker launcher needs xmanager, the optional `cluster` extra.
  import launchpad as lp  # pylint: disable=g-import-not-at-top
  from launchpad.launch.xm_docker import launch as xm_launch  # pylint: disable=g-import-not-at-top
  if not dry_run:
    lp.launch(program, launch_type='vertex_ai', xm_resources=resources)
    return ''
  output = io.StringIO()
  with _recording(xm_launch) as recorders, contextlib.redirect_stdout(output):
    lp.launch(program, launch_type='vertex_ai', xm_resources=resources)
  # Launchpad prints the node -> worker pool names after 'launching'; keep the mapping only.
  mapping = [line.strip() for line in _strip_colours(output.getvalue()).splitlines()
             if '->' in line]
  return describe(recorders[0], mapping)


def _strip_colours(text: str) -> str:
  return re.sub(r'\x1b\[[0-9;]*m', '', text)


def staging_directory() -> str:
  """A fresh temporary directory without '_' in its path (Vertex AI rejects it in names),
  removed when this process exits (Launchpad has copied it into the images by then)."""
  while True:
    path = tempfile.mkdtemp(prefix='s3ta-cluster-')
    if '_' not in path:
      atexit.register(shutil.rmtree, path, ignore_errors=True)
      return path
    shutil.rmtree(path, ignore_errors=True)


def check_workdir(workdir: str) -> None:
  """A cluster run's workdir must be remote storage every node reaches (e.g. gs://BUCKET/run)."""
  if not storage.is_remote(workdir):
    raise ValueError(f'--workdir={workdir!r} is a local path; a Vertex AI run needs storage that '
                     'every node reaches, e.g. --workdir=gs://BUCKET/run.')

