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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from veloz.errors import VelozError

# How long an SSH session may take to start (connect, authenticate, exec).
SSH_START_S = 20.0


def _env_argv(argv: Sequence[str], env: Mapping[str, str] | None) -> list[str]:
    """The command with extra environment variables, given on its command line
    (env(1)): that reaches a command in a namespace and over SSH alike."""
    if not env:
        return list(argv)
    return ["env", *(f"{k}={v}" for k, v in env.items()), *argv]


_MACHINE_WIDE = re.compile(r"^/proc/(stat|[0-9]+/stat)$")


class Host:
    """Base: subclasses say how a command line becomes a local argv."""

    name: str = "?"
    veloz: tuple[str, ...] = (sys.executable, "-m", "veloz.cli")

    def argv(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        raise NotImplementedError

    def describe(self) -> dict:
        raise NotImplementedError

    def veloz_argv(self, *args: str) -> list[str]:
        """`veloz ARGS` as this host runs it (not yet wrapped by argv())."""
        return [*self.veloz, *args]

    def run(self, argv: Sequence[str], timeout: float = 60.0, input: str | None = None,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:  # fmt: skip
        """To completion, output captured; the caller checks returncode.
        Never the terminal's stdin: ssh would forward what the user types."""
        stdin = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
        return subprocess.run(self.argv(argv, env), capture_output=True, text=True,
                              timeout=timeout, check=False, **stdin)  # fmt: skip

    def run_measured(self, argv: Sequence[str], timeout: float
                     ) -> tuple[subprocess.CompletedProcess, float]:  # fmt: skip
        """run(), and the CPU-seconds the command used (user + system).

        Here: what the kernel charged to our children meanwhile (`ip netns
        exec` execs the command, so that is the command's own)."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = self.run(argv, timeout)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return done, cpu

    def spawn(self, argv: Sequence[str], env: Mapping[str, str] | None = None
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


class LocalHost(Host):
    """This machine, in the namespace veloz itself runs in."""

    def __init__(self, name: str = "local") -> None:
        self.name = name

    def argv(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        return _env_argv(argv, env)

    def describe(self) -> dict:
        return {"name": self.name, "kind": "local"}

    def read_file(self, path: str) -> str:
        return Path(path).read_text()

    def write_file(self, path: str, text: str) -> None:
        Path(path).write_text(text)


class NetnsHost(Host):
    """A network namespace on this machine (`ip netns exec`)."""

    def __init__(self, netns: str, name: str | None = None) -> None:
        self.netns = netns
        self.name = name or netns

    def argv(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *_env_argv(argv, env)]

    def describe(self) -> dict:
        return {"name": self.name, "kind": "netns", "netns": self.netns}

    def read_file(self, path: str) -> str:
        # CPU counters are the machine's, not the namespace's (only /proc/net
        # and /sys differ inside): read them here, as the testbed always did,
        # rather than start a process inside the measured window
        if _MACHINE_WIDE.match(path):
            return Path(path).read_text()
        return super().read_file(path)


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
    _control: str | None = field(default=None, repr=False)

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

    def argv(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        # ssh hands the remote shell one string: quote each word for it
        return [*self._ssh(), shlex.join(_env_argv(argv, env))]

    def describe(self) -> dict:
        return {"name": self.name, "kind": "ssh", "host": self.host, "user": self.user,
                "port": self.port}  # fmt: skip

    def run_measured(self, argv: Sequence[str], timeout: float
                     ) -> tuple[subprocess.CompletedProcess, float]:  # fmt: skip
        # The remote shell's `times` says what its children used; its lines
        # are taken off stderr before anyone reads it.
        script = f"{shlex.join(argv)}; rc=$?; times >&2; exit $rc"
        done = subprocess.run([*self._ssh(), script], capture_output=True, text=True,
                              timeout=timeout, check=False)  # fmt: skip
        lines = done.stderr.rstrip("\n").split("\n")
        cpu = 0.0
        if len(lines) >= 2 and (m := _TIMES.match(lines[-1].strip())):
            cpu = 60 * (int(m[1]) + int(m[3])) + float(m[2]) + float(m[4])
            done.stderr = "\n".join(lines[:-2]) + ("\n" if lines[:-2] else "")
        return done, cpu

    def spawn(self, argv: Sequence[str], env: Mapping[str, str] | None = None
              ) -> subprocess.Popen:  # fmt: skip
        script = f"echo $$; exec {shlex.join(_env_argv(argv, env))}"
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
