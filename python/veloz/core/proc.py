"""Running veloz's own commands, possibly inside a testbed namespace."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from veloz.core.errors import VelozError

if TYPE_CHECKING:
    from veloz.lab.hosts import Host


def veloz_argv(*args: str) -> list[str]:
    """This very veloz, runnable in another namespace (same interpreter/venv)."""
    return [sys.executable, "-m", "veloz.cli", *args]


def in_netns(netns: str | None, argv: Sequence[str]) -> list[str]:
    return ["ip", "netns", "exec", netns, *argv] if netns else list(argv)


def run_json(argv: Sequence[str], timeout: float) -> dict:
    """Run a command that prints one JSON object; its error line on failure."""
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    return json_result(done, argv[0])


def json_result(done: subprocess.CompletedProcess, what: str) -> dict:
    """The one JSON object a finished command printed; its error line if it failed."""
    if done.returncode != 0:
        raise VelozError(_last_line(done.stderr) or f"{what} failed", code=1)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].removeprefix("veloz: ") if lines else ""


class Runner:
    """`veloz run ... --json` in the background: wait for attach, stop, summary."""

    def __init__(
        self,
        argv: Sequence[str],
        attach_timeout: float = 15.0,
        what: str = "the NF",
        host: Host | None = None,
    ) -> None:
        self.what = what
        # on a lab host (a namespace, over SSH), else right here
        self.proc = (
            host.spawn(argv)
            if host is not None
            else subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        )  # fmt: skip
        assert self.proc.stdout is not None
        # The first line says the NF is attached; a run that fails prints
        # nothing and exits, one that hangs is stopped after attach_timeout.
        ready, _, _ = select.select([self.proc.stdout], [], [], attach_timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            hung = not ready  # nothing at all within attach_timeout
            if hung:
                self.proc.send_signal(signal.SIGINT)
            try:
                _, err = self.proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                _, err = self.proc.communicate()
            if hung:
                raise VelozError(f"{what} did not start in time ({attach_timeout:g} s)", code=1)
            raise VelozError(_last_line(err) or f"{what} exited before attaching", code=1)
        self.attached = json.loads(line)

    def stop(self) -> dict:
        """SIGINT, as a user's Ctrl-C; returns the summary record."""
        self.proc.send_signal(signal.SIGINT)
        out, err = self.proc.communicate(timeout=20)
        records = [json.loads(x) for x in out.splitlines() if x.strip()]
        self.records = records  # every line: interval counters, dispatch events
        summary = [r for r in records if r.get("summary")]
        if self.proc.returncode != 0 or not summary:
            raise VelozError(_last_line(err) or f"{self.what} did not stop cleanly", code=1)
        return summary[-1]

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()
