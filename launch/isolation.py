"""Keeps a local run's servers off the network: the launcher re-runs itself in a private network namespace.

Reverb and Launchpad's courier listen on `[::]:port` (every interface; the address is
compiled into both libraries), and courier deserialises pickles: on a shared machine
anyone who can reach it could write trajectories or run code in a node. A `local_mp`
run needs no network beyond this machine, so `launch.train` (and `launch.pbt`) re-executes itself under
`unshare --net` (with `--user --map-root-user` when not root), brings the namespace's
loopback interface up and launches every node there: the only interface the servers
can listen on is `lo`, so nothing outside this run can connect. Where namespaces are
unavailable (no `unshare`, unprivileged user namespaces disabled) the launcher says so
and runs on the host network (`--network=host` asks for that without the warning).
"""

import fcntl
import os
import shutil
import socket
import struct
import subprocess
import sys
from typing import Optional, Sequence

from absl import flags

NETWORK = flags.DEFINE_enum(
    'network', 'isolated', ['isolated', 'host'],
    'Local runs: isolated runs every node in a private network namespace whose only '
    'interface is loopback (Reverb and courier listen on all interfaces); host leaves '
    'their ports reachable from other machines.')

INSIDE_ENV = 'S3TA_ISOLATED_NETWORK'  # set in the re-executed launcher (and inherited by nodes)
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def unshare_command(euid: int) -> list:
  """`unshare` arguments for a new network namespace (plus a user namespace when not root)."""
  return ['--net'] if euid == 0 else ['--user', '--map-root-user', '--net']


def inside() -> bool:
  return os.environ.get(INSIDE_ENV) == '1'


def bring_loopback_up() -> None:
  """Sets `lo` up in this (new) namespace: 127.0.0.1 and ::1 then work."""
  with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    request = struct.pack('16sH14x', b'lo', 0)
    flags = struct.unpack('16sH', fcntl.ioctl(s, _SIOCGIFFLAGS, request)[:18])[1]
    fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack('16sH14x', b'lo', flags | _IFF_UP))


def interfaces(pid: str = 'self') -> list:
  """Network interfaces visible to process `pid` (its namespace), from /proc/<pid>/net/dev."""
  with open(f'/proc/{pid}/net/dev') as f:
    return sorted(line.split(':', 1)[0].strip() for line in f.readlines()[2:] if ':' in line)


def isolate(module: str, argv: Sequence[str]) -> None:
  """Re-runs `python -m module argv` in a private network namespace, or warns why it cannot.

  Inside the namespace (the re-executed process) it brings loopback up and returns.
  """
  if inside():
    bring_loopback_up()
    print(f'[launch] network isolated: the nodes see only {interfaces()}.', flush=True)
    return
  reason = reexec_isolated(module, argv)  # returns only when isolation is unavailable
  print(f'[launch] warning: cannot isolate the network ({reason}); Reverb and courier listen '
        'on every interface of this machine. --network=host runs so without this warning.',
        file=sys.stderr, flush=True)


def reexec_isolated(module: str, argv: Sequence[str]) -> Optional[str]:
  """Replaces this process with `python -m module argv` in a private network namespace.

  Returns (does not exec) with the reason when namespaces are not available here.
  """
  unshare = shutil.which('unshare')
  if unshare is None:
    return "the 'unshare' command (util-linux) is not installed"
  args = unshare_command(os.geteuid())
  probe = subprocess.run([unshare, *args, 'true'], capture_output=True, text=True, check=False)
  if probe.returncode != 0:
    return f'unshare {" ".join(args)} failed: {probe.stderr.strip() or probe.returncode}'
  os.environ[INSIDE_ENV] = '1'
  sys.stdout.flush()
  sys.stderr.flush()
  os.execv(unshare, [unshare, *args, sys.executable, '-m', module, *argv])
  return None  # not reached
