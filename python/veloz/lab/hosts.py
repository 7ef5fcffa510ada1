# SPDX-License-Identifier: BSD-2-Clause
"""Where a lab role's commands run: this machine, a network namespace on it,
or another machine over SSH.

A Host runs a command to completion (`run`, `run_measured`), starts one in the
background (`spawn`), and reads or writes a file. The lab names roles
(generator, dut, sink), never namespaces or machines: the topology maps each
role to a Host, so one experiment runs on the namespace testbed and on a
generator box and a server alike.

Over SSH, a background command is stopped as a user stops it locally, with
SIGINT to the command itself (its summary depends on it): the remote shell
prints its pid and execs the command, and `send_signal` sends the signal
through a second session. ssh multiplexes every session over one connection
(ControlMaster), so the small reads between measurements cost a round trip,
not a handshake; `close()` ends it.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from veloz.core import paths
from veloz.core.errors import VelozError

# How long an SSH session may take to start (connect, authenticate, exec).
SSH_START_S = 20.0


def env_argv(argv: Sequence[str], env: Mapping[str, str | None] | None) -> list[str]:
    """The command with extra environment variables, given on its command line
    (env(1)): that reaches a command in a namespace and over SSH alike. A
    value of None takes the variable away (env -u), whatever the host had."""
    if not env:
        return list(argv)
    unset = [a for k, v in env.items() if v is None for a in ("-u", k)]
    return ["env", *unset, *(f"{k}={v}" for k, v in env.items() if v is not None), *argv]


# Read here rather than in the namespace: the CPU counters are the machine's,
# and a namespace shares this machine's pids (only /proc/net and /sys differ)
_SAME_HERE = re.compile(r"^/proc/(stat|[0-9]+/(stat|status))$")
# The CPU time of every thread of a process, in ns (the scheduler's, far
# finer than the clock tick), as one shell command: one round trip over SSH
_THREADS_CPU = 'cat /proc/"$1"/task/*/schedstat 2>/dev/null'
# Per thread of a process: "TID RUN_NS WAIT_NS SLICES CPULIST" (lab.workers)
_THREADS_SCHED = (
    'for t in /proc/"$1"/task/*; do echo "${t##*/} $(cat "$t/schedstat")'
    ' $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" "$t/status")"; done 2>/dev/null'
)
# Where veloz's own Python finds a built or installed tool or library
_LOOKUP = (
    "import sys\nfrom veloz.core import paths\nprint(getattr(paths, sys.argv[1])(sys.argv[2]))"
)


Env = Mapping[str, str | None]


class Host:
    """Base: subclasses say how a command line becomes a local argv."""

    name: str = "?"
    veloz: tuple[str, ...] = (sys.executable, "-m", "veloz.cli")
    # the Python that imports veloz there (the lab's helpers in Python)
    python: tuple[str, ...] = (sys.executable,)
    # its CPUs are this machine's (a namespace here, or here itself)
    this_machine: bool = False

    def argv(self, argv: Sequence[str], env: Env | None = None) -> list[str]:
        raise NotImplementedError

    def describe(self) -> dict:
        raise NotImplementedError

    def veloz_argv(self, *args: str) -> list[str]:
        """`veloz ARGS` as this host runs it (not yet wrapped by argv())."""
        return [*self.veloz, *args]

    def python_argv(self, module: str, *args: str) -> list[str]:
        """`python -m MODULE ARGS` with veloz's Python there (a lab helper)."""
        return [*self.python, "-m", module, *args]

    def tool(self, name: str) -> str:
        """Where this host's veloz has the C tool `name` (VelozError if not)."""
        return str(paths.tool(name))

    def library(self, name: str) -> str:
        """Where this host's veloz has the shared library `name`."""
        return str(paths.library(name))

    def which(self, command: str) -> str | None:
        """The path of a command on this host's PATH, or None."""
        # sbin too: a non-root login's PATH (or ssh's default) often lacks it
        done = self.run(["sh", "-c", 'PATH="$PATH:/usr/sbin:/sbin" command -v "$1"', "sh",
                         command], timeout=SSH_START_S)  # fmt: skip
        path = done.stdout.strip()
        return path if done.returncode == 0 and path.startswith("/") else None

    def threads_cpu_s(self, pid: int) -> float:
        """CPU seconds every thread of a live process has run; 0 if it is gone."""
        done = self.run(["sh", "-c", _THREADS_CPU, "sh", str(pid)], timeout=SSH_START_S)
        return _schedstat_s(done.stdout)

    def threads_sched(self, pid: int) -> str:
        """Each thread of a live process: "TID RUN_NS WAIT_NS SLICES CPULIST"."""
        done = self.run(["sh", "-c", _THREADS_SCHED, "sh", str(pid)], timeout=SSH_START_S)
        return done.stdout

    @contextlib.contextmanager
    def temp_dir(self, prefix: str) -> Iterator[str]:
        """A private directory on this host for the block, removed afterwards."""
        done = self.run(["mktemp", "-d", "-t", f"{prefix}XXXXXX"], timeout=SSH_START_S)
        path = done.stdout.strip()
        if done.returncode != 0 or not path.startswith("/"):
            raise VelozError(f"{self.name}: cannot make a directory: {done.stderr.strip()}",
                             code=1)  # fmt: skip
        try:
            yield path
        finally:
            self.run(["rm", "-rf", "--", path], timeout=SSH_START_S)

    @contextlib.contextmanager
    def staged(self, local_dir: str | os.PathLike) -> Iterator[str]:
        """The files of `local_dir` (written here) where this host reads them:
        a copy in a directory of its own, removed afterwards. A config that
        names another of them by a relative path finds it there too."""
        with self.temp_dir("veloz-lab-") as there:
            for f in sorted(Path(local_dir).iterdir()):
                if f.is_file():
                    self.write_file(f"{there}/{f.name}", f.read_text())
            yield there

    def run(self, argv: Sequence[str], timeout: float = 60.0, input: str | None = None,
            env: Env | None = None) -> subprocess.CompletedProcess:  # fmt: skip
        """To completion, output captured; the caller checks returncode.
        Never the terminal's stdin: ssh would forward what the user types."""
        stdin = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
        return subprocess.run(self.argv(argv, env), capture_output=True, text=True,
                              timeout=timeout, check=False, **stdin)  # fmt: skip

    def run_measured(self, argv: Sequence[str], timeout: float, env: Env | None = None
                     ) -> tuple[subprocess.CompletedProcess, float]:  # fmt: skip
        """run(), and the CPU-seconds the command used (user + system).

        Here: what the kernel charged to our children meanwhile (`ip netns
        exec` execs the command, so that is the command's own)."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = self.run(argv, timeout, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return done, cpu

    def spawn(self, argv: Sequence[str], env: Env | None = None
              ) -> subprocess.Popen:  # fmt: skip
        """In the background, stdout and stderr piped (text)."""
        return subprocess.Popen(self.argv(argv, env), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip

    @staticmethod
    def pid(proc: subprocess.Popen) -> int:
        """The pid of a spawned command on its host (for /proc/PID/...)."""
        return getattr(proc, "remote_pid", proc.pid)

    def read_file(self, path: str) -> str:
        done = self.run(["cat", "--", path], timeout=SSH_START_S)
        if done.returncode != 0:
            raise OSError(f"{self.name}: cannot read {path}: {done.stderr.strip()}")
        return done.stdout

    def write_file(self, path: str, text: str) -> None:
        # sh -c: the redirection happens on the host, not here
        done = self.run(["sh", "-c", 'cat > "$1"', "sh", path], timeout=SSH_START_S, input=text)
        if done.returncode != 0:
            raise OSError(f"{self.name}: cannot write {path}: {done.stderr.strip()}")

    def close(self) -> None:
        """Release what the host holds open (an SSH connection)."""


class _ThisMachine(Host):
    """A host whose files and pids are this machine's: no copies, no sessions."""

    this_machine = True

    def threads_cpu_s(self, pid: int) -> float:
        return _local_threads_cpu_s(pid)

    def threads_sched(self, pid: int) -> str:
        # read here: a process started in the measured window would be measured
        return _local_threads_sched(pid)

    @contextlib.contextmanager
    def staged(self, local_dir: str | os.PathLike) -> Iterator[str]:
        yield str(local_dir)


class LocalHost(_ThisMachine):
    """This machine, in the namespace veloz itself runs in."""

    def __init__(self, name: str = "local") -> None:
        self.name = name

    def argv(self, argv: Sequence[str], env: Env | None = None) -> list[str]:
        return env_argv(argv, env)

    def describe(self) -> dict:
        return {"name": self.name, "kind": "local"}

    def read_file(self, path: str) -> str:
        return Path(path).read_text()

    def write_file(self, path: str, text: str) -> None:
        Path(path).write_text(text)


class NetnsHost(_ThisMachine):
    """A network namespace on this machine (`ip netns exec`)."""

    def __init__(self, netns: str, name: str | None = None) -> None:
        self.netns = netns
        self.name = name or netns

    def argv(self, argv: Sequence[str], env: Env | None = None) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *env_argv(argv, env)]

    def describe(self) -> dict:
        return {"name": self.name, "kind": "netns", "netns": self.netns}

    def read_file(self, path: str) -> str:
        # read here, as the testbed always did, rather than start a process
        # inside the measured window (the namespace shares /proc's counters)
        if _SAME_HERE.match(path):
            return Path(path).read_text()
        return super().read_file(path)


def stop(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """A background helper stopped: SIGTERM (to the command itself, over
    SSH too), then SIGKILL if it has not ended within `timeout`."""
    proc.terminate()
    try:
        proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


def _schedstat_s(text: str) -> float:
    """The sum of the first field of schedstat lines (ns on CPU), in seconds."""
    total = 0
    for line in text.splitlines():
        first = line.split(maxsplit=1)[0] if line.strip() else ""
        total += int(first) if first.isdigit() else 0
    return total / 1e9


def _local_threads_cpu_s(pid: int) -> float:
    lines = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                lines.append(f.read())
    except OSError:  # gone, or a thread ended while we read
        pass
    return _schedstat_s("".join(lines))


def _local_threads_sched(pid: int) -> str:
    lines = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                stat = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                allowed = [ln for ln in f if ln.startswith("Cpus_allowed_list:")]
            cpus = allowed[0].split(":", 1)[1].strip() if allowed else ""
            lines.append(f"{tid} {stat} {cpus}")
    except OSError:  # gone, or a thread ended while we read
        pass
    return "\n".join(lines)


class RemoteProcess(subprocess.Popen):
    """A command started over SSH; signals go to the command, not to ssh.

    The remote shell prints its pid, then execs the command (same pid)."""

    host: SshHost
    remote_pid: int

    @property
    def remote_gone(self) -> bool:
        """The client exited with the command's status: it ended over there.
        (255 is ssh's own failure, or a command killed by a signal; a client
        killed here says nothing about the command.)"""
        return self.poll() is not None and 0 <= self.returncode < 255

    def send_signal(self, sig: int) -> None:
        # Even when the local client has gone (killed, its connection lost):
        # the command over there may still run, with its program attached.
        if self.remote_gone:
            return
        name = signal.Signals(sig).name.removeprefix("SIG")
        # the command may have exited meanwhile: then kill fails, harmlessly
        self.host.run(["kill", f"-{name}", str(self.remote_pid)], timeout=SSH_START_S)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        try:
            self.send_signal(signal.SIGKILL)
        except subprocess.SubprocessError:
            pass
        super().kill()  # the local ssh client, whatever became of the remote end


_TIMES = re.compile(r"^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$")


@dataclass
class SshHost(Host):
    """Another machine over OpenSSH, key only, never a password prompt."""

    host: str
    user: str = "root"
    port: int = 22
    identity: str | None = None
    known_hosts: str | None = None
    options: list[str] = field(default_factory=list)
    name: str = "ssh"
    veloz: tuple[str, ...] = ("veloz",)
    # None: veloz's own interpreter when veloz is `PYTHON -m veloz.cli`, else python3
    python_cmd: tuple[str, ...] | None = None
    _control: str | None = field(default=None, repr=False)
    _found: dict = field(default_factory=dict, repr=False)

    @property
    def python(self) -> tuple[str, ...]:  # type: ignore[override]
        if self.python_cmd:
            return self.python_cmd
        if len(self.veloz) == 3 and self.veloz[1:] == ("-m", "veloz.cli"):
            return (self.veloz[0],)
        return ("python3",)

    def _lookup(self, kind: str, name: str) -> str:
        """A tool's or library's path as veloz's Python there finds it (once)."""
        if (kind, name) not in self._found:
            done = self.run([*self.python, "-c", _LOOKUP, kind, name], timeout=SSH_START_S)
            path = done.stdout.strip()
            if done.returncode != 0 or not path.startswith("/"):
                why = (done.stderr.strip().splitlines() or ["not found"])[-1]
                # the traceback's last line
                why = why.removeprefix("veloz.core.errors.VelozError: ")
                raise VelozError(f"{self.name}: no {name} there: {why}", code=1)
            self._found[kind, name] = path
        return self._found[kind, name]

    def tool(self, name: str) -> str:
        return self._lookup("tool", name)

    def library(self, name: str) -> str:
        return self._lookup("library", name)

    def _ssh(self) -> list[str]:
        ssh = shutil.which("ssh")
        if ssh is None:
            raise VelozError(f"{self.name}: ssh is not installed (openssh-client)")
        if self._control is None:
            self._control = tempfile.mkdtemp(prefix="vz-ssh-")
        argv = [ssh, "-F", "none", "-T", "-p", str(self.port),
                # never ask: a missing key or an unknown host key is an error
                "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
                "-o", f"ConnectTimeout={int(SSH_START_S)}",
                "-o", "ControlMaster=auto", "-o", f"ControlPath={self._control}/%C",
                # a connection left by a crash ends by itself
                "-o", "ControlPersist=60", "-o", "LogLevel=ERROR"]  # fmt: skip
        if self.identity:
            argv += ["-o", "IdentitiesOnly=yes", "-i", self.identity]
        if self.known_hosts:
            argv += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        for opt in self.options:
            argv += ["-o", opt]
        return [*argv, f"{self.user}@{self.host}", "--"]

    def argv(self, argv: Sequence[str], env: Env | None = None) -> list[str]:
        # ssh hands the remote shell one string: quote each word for it
        return [*self._ssh(), shlex.join(env_argv(argv, env))]

    def describe(self) -> dict:
        return {"name": self.name, "kind": "ssh", "host": self.host, "user": self.user,
                "port": self.port}  # fmt: skip

    def run_measured(self, argv: Sequence[str], timeout: float, env: Env | None = None
                     ) -> tuple[subprocess.CompletedProcess, float]:  # fmt: skip
        # The remote shell's `times` says what its children used; its lines
        # are taken off stderr before anyone reads it.
        script = f"{shlex.join(env_argv(argv, env))}; rc=$?; times >&2; exit $rc"
        done = subprocess.run([*self._ssh(), script], capture_output=True, text=True,
                              timeout=timeout, check=False)  # fmt: skip
        lines = done.stderr.rstrip("\n").split("\n")
        cpu = 0.0
        if len(lines) >= 2 and (m := _TIMES.match(lines[-1].strip())):
            cpu = 60 * (int(m[1]) + int(m[3])) + float(m[2]) + float(m[4])
            done.stderr = "\n".join(lines[:-2]) + ("\n" if lines[:-2] else "")
        return done, cpu

    def spawn(self, argv: Sequence[str], env: Env | None = None
              ) -> subprocess.Popen:  # fmt: skip
        script = f"echo $$; exec {shlex.join(env_argv(argv, env))}"
        # its own session: a Ctrl-C at the terminal reaches veloz, which stops
        # the command over there cleanly, not the ssh client (that would
        # leave the command running, its program attached)
        proc = RemoteProcess([*self._ssh(), script], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)  # fmt: skip
        proc.host = self
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], SSH_START_S)
        first = proc.stdout.readline().strip() if ready else ""
        if not first.isdigit():
            subprocess.Popen.kill(proc)  # the local client: nothing started there
            _, err = proc.communicate()
            why = (err or "").strip().splitlines()
            raise VelozError(f"{self.name}: could not start {argv[0]} over ssh"
                             + (f": {why[-1]}" if why else ""), code=1)  # fmt: skip
        proc.remote_pid = int(first)
        return proc

    def close(self) -> None:
        if self._control is None:
            return
        ssh = shutil.which("ssh")
        if ssh and os.listdir(self._control):  # a master is listening: end it
            subprocess.run([ssh, "-F", "none", "-o", f"ControlPath={self._control}/%C",
                            "-p", str(self.port), "-O", "exit", f"{self.user}@{self.host}"],
                           capture_output=True, timeout=10, check=False)  # fmt: skip
        shutil.rmtree(self._control, ignore_errors=True)
        self._control = None
