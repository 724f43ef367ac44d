"""Several command lines of one launcher in one Python process, for the bad-input tests.

A launcher started as `python -m launch.X` spends about 8 s of CPU on imports (TensorFlow,
through rlax and Reverb) before it can reject a bad flag, and the suite has dozens of
such cases. `run_each` starts one child process that runs the module as `-m` does
(`runpy`, `__name__ == '__main__'`, `sys.argv` set) once per command line, removes the
flags each run defined before the next, and returns what each run exited with and
wrote. Flags that modules imported by the launcher define (absl's, `--network`) are
defined once and keep a value a run gave them, so one call should only hold command
lines that do not set those. Each launcher keeps at least one test that starts it as
`python -m`, for the entry point itself.

No flags are defined here: pytest imports every test module into one process.
"""

import json
import os
import subprocess
import sys
from typing import List, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_EXIT_MARK = '=== launcher_runs exit '

_DRIVER = f"""
import json, runpy, sys
from launch import host_tuning
host_tuning.reexec_with_host_tuning()  # as the launcher's own __main__ would, once, up front
from absl import flags
module, runs = sys.argv[1], json.loads(sys.argv[2])
for argv in runs:
  before = set(flags.FLAGS)
  sys.argv = [module] + argv
  try:
    runpy.run_module(module, run_name='__main__', alter_sys=True)
    code = 0
  except SystemExit as e:  # as the interpreter ends: None is 0, a message is printed and is 1
    code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
    if not isinstance(e.code, (int, type(None))):
      print(e.code, file=sys.stderr, flush=True)
  imported = {{f.name for owner, owned in flags.FLAGS.flags_by_module_dict().items()
              if owner in sys.modules and not owner.startswith('ml_collections') for f in owned}}
  for name in set(flags.FLAGS) - before - imported:  # the launcher's own and its --config.*
    delattr(flags.FLAGS, name)
  for stream in (sys.stdout, sys.stderr):
    print('\\n{_EXIT_MARK}%d' % code, file=stream, flush=True)
"""


def run_each(module: str, command_lines: Sequence[Sequence[str]], *, env=None,
             timeout: float = 300) -> List[subprocess.CompletedProcess]:
  """Runs `python -m module *argv` for each argv in one child process, in order.

  Returns one CompletedProcess per command line, with its exit status and the stdout
  and stderr it wrote. A run that raises anything but SystemExit ends the child, and
  this raises an AssertionError that says how many runs finished, with the child's stderr.
  """
  env = dict(os.environ if env is None else env)
  done = subprocess.run([sys.executable, '-c', _DRIVER, module, json.dumps([list(a) for a in command_lines])],
                        cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
  codes, stdouts = _split(done.stdout)
  _, stderrs = _split(done.stderr)
  if done.returncode != 0 or len(codes) != len(command_lines):
    raise AssertionError(f'{module}: the child ended after {len(codes)} of {len(command_lines)} '
                         f'runs with exit status {done.returncode}:\n{done.stderr[-3000:]}')
  return [subprocess.CompletedProcess([module, *argv], code, out, err)
          for argv, code, out, err in zip(command_lines, codes, stdouts, stderrs)]


def run_all_but_first(module: str, cases: Sequence[tuple], *, env=None) -> dict:
  """`run_each` over `cases[1:]`, each a (workdir, argv) pair: {case index: (result, workdir)}.

  The first case is left to the caller, to run as `python -m` for the entry point itself.
  """
  results = run_each(module, [argv for _, argv in cases[1:]], env=env)
  return {i: (result, workdir) for i, (result, (workdir, _)) in enumerate(zip(results, cases[1:]), start=1)}


def _split(text: str):
  """Each run's exit status, and what it wrote: the text before its mark."""
  parts = text.split(_EXIT_MARK)
  codes = [int(part.split('\n', 1)[0]) for part in parts[1:]]
  outputs = [parts[0]] + [part.split('\n', 1)[1] if '\n' in part else '' for part in parts[1:]]
  return codes, outputs[:len(codes)]
