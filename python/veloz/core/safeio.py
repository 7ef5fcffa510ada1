"""Bad input, handled once: bounded reads, checked writes, same-file
refusal, finite numbers in range, quiet broken pipes.

Every subcommand reads its files and takes its numbers through here, so a
class of bad input is refused the same way everywhere (issue 22): a config
from /dev/zero, an output that is the input, `--out /dev/full`, `--duration
nan`.
"""

from __future__ import annotations

import argparse
import math
import os
import stat
from pathlib import Path

from veloz.core import options
from veloz.core.errors import VelozError

# The largest text file veloz reads whole (configs, route tables, results):
# the paper's 752,138-route table is about 30 MiB as text.
MAX_READ = 64 << 20


def read_bytes(path: str | os.PathLike, what: str, cap: int = MAX_READ) -> bytes:
    """A file's bytes, refused in one line past `cap` (also /dev/zero, a FIFO)."""
    try:
        with open(path, "rb") as f:
            data = f.read(cap + 1)
    except FileNotFoundError:
        raise VelozError(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise VelozError(f"{what} {path} is a directory") from None
    except OSError as e:
        raise VelozError(f"{what} {path}: {e.strerror}") from None
    if len(data) > cap:
        raise VelozError(f"{what} {path} is larger than {cap >> 20} MiB")
    return data


def read_text(path: str | os.PathLike, what: str, cap: int = MAX_READ) -> str:
    data = read_bytes(path, what, cap)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise VelozError(f"{what} {path}: not UTF-8 text (byte {e.start})") from None


def _ident(path: str | os.PathLike) -> tuple[int, int] | None:
    try:
        st = os.stat(path)  # follows symlinks: a link to the input is the input
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def refuse_same_file(out: str | os.PathLike, out_option: str, **inputs: object) -> None:
    """Refuse an output that is one of the inputs (by device and inode, so
    symlinks and hard links count): opening it for writing would truncate
    the input before it is read."""
    out_id = _ident(out)
    if out_id is None:
        return
    for option, path in inputs.items():
        if path is not None and _ident(path) == out_id:
            raise VelozError(f"{out_option} {out} is the same file as {option} {path}")


def check_output(path: str | os.PathLike, option: str) -> None:
    """Refuse an output path that cannot be a file: a directory, a missing directory."""
    p = Path(path)
    if p.is_dir():
        raise VelozError(f"{option} {path} is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise VelozError(f"{option} {path}: directory {parent} does not exist")


def write_text(path: str | os.PathLike, text: str, option: str) -> None:
    """Write all of `text` or fail in one line: every write, and the close,
    are checked (a full disk or /dev/full is a failure, not a success)."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            st = os.fstat(f.fileno())
            if stat.S_ISREG(st.st_mode):
                os.fsync(f.fileno())
    except OSError as e:
        raise VelozError(f"cannot write {option} {path}: {e.strerror}", code=1) from None


# ---- numbers ----------------------------------------------------------------


def number(kind: type, lo: float | None, hi: float | None):
    """An argparse type: `kind` (int or float), finite, within [lo, hi].

    argparse names the option in its error: `argument --duration: ...`.
    """

    def parse(text: str):
        try:
            value = kind(text)
        except (ValueError, OverflowError):
            word = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"'{text}' is not {word}") from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"'{text}' is not a finite number")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"'{text}' is not {_range(lo, hi)}")
        return value

    parse.__name__ = kind.__name__  # argparse's "invalid int value" wording
    parse.bounds = (kind, lo, hi)  # type: ignore[attr-defined]  # read by tests/cli
    return parse


def _range(lo: float | None, hi: float | None) -> str:
    def text(x: float) -> str:
        return str(x) if isinstance(x, int) else f"{x:g}"

    if lo is not None and hi is not None:
        return f"between {text(lo)} and {text(hi)}"
    return f"at least {text(lo)}" if lo is not None else f"at most {text(hi)}"


# Defaults for an option declared with a bare type=int or type=float: veloz
# has no negative quantity on its command line, and none beyond what a u64
# (ints) or a few years in seconds (floats) holds. Options with tighter
# bounds declare them with `number()` or in BOUNDS below.
DEFAULT_INT = (0, (1 << 63) - 1)
DEFAULT_FLOAT = (0.0, 1e9)

# (command, option) -> (lo, hi): bounds the code already states in prose or
# checks later, given to argparse so the error names the option at once.
BOUNDS: dict[tuple[str, str], tuple[float, float]] = {
    ("run", "--duration"): (1e-3, 1e9),
    ("run", "--interval"): (1e-3, 86400),
    ("gen", "--duration"): (1e-3, 1e9),
    ("route-table", "--count"): (1, 2_000_000),
    ("route-table", "--port"): (0, 63),
    ("route-table", "--seed"): (0, (1 << 63) - 1),
    ("bench", "--trials"): (1, 1000),
    ("bench", "--seconds"): (1e-3, 86400),
    ("bench", "--steps"): (1, 64),
    ("bench", "--loss"): (0, 1),
    ("bench", "--repeat"): (1, 100_000_000),
    ("bench", "--udp-workers"): (1, 256),  # knotd's own limit
    ("demo", "--count"): (1, 1 << 40),
    ("demo", "--trials"): (1, 1000),
    ("demo", "--seconds"): (1e-3, 86400),
}


# (command, option) -> the C tool whose option it is: the bounds are that
# tool's own (its --describe-options), so each limit is written once, in C.
C_BOUNDS: dict[tuple[str, str], str] = {
    ("replay", "--repeat"): "vz-replay",
    ("udpd", "--interval-ms"): "vz-udpd",
    ("sim", "--cores"): "vz-sim",
    ("sim", "--load"): "vz-sim",
    ("sim", "--step-ms"): "vz-sim",
    ("sim", "--burst-us"): "vz-sim",
    ("sim", "--service-us"): "vz-sim",
    ("sim", "--flows"): "vz-sim",
    ("sim", "--zipf-s"): "vz-sim",
    ("sim", "--flow-slots"): "vz-sim",
    ("sim", "--wake-us"): "vz-sim",
    ("sim", "--hold-us"): "vz-sim",
    ("sim", "--queue-cap"): "vz-sim",
    ("sim", "--settle-us"): "vz-sim",
    ("sim", "--max-forced"): "vz-sim",
    ("sim", "--migrate-gap"): "vz-sim",
    ("sim", "--force-gap"): "vz-sim",
    ("sim", "--migrate-us"): "vz-sim",
    ("sim", "--dispatch-ns"): "vz-sim",
    ("sim", "--scan-ns"): "vz-sim",
    ("sim", "--seed"): "vz-sim",
    ("sim", "--timeline-us"): "vz-sim",
}


def bound_numbers(parser: argparse.ArgumentParser, command: str = "") -> None:
    """Give every numeric option of `parser` and its subparsers a finite,
    bounded type: a bare int or float becomes number() with BOUNDS or the
    defaults. One walk, so no option added later escapes it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                bound_numbers(sub, f"{command} {name}".strip())
            continue
        if action.type in (int, float) and action.option_strings:
            top = command.split()[0] if command else ""
            option = max(action.option_strings, key=len)
            if (top, option) in C_BOUNDS:
                action.type = Bounded(action.type, C_BOUNDS[top, option], option)
                continue
            lo, hi = BOUNDS.get((top, option), DEFAULT_INT if action.type is int else DEFAULT_FLOAT)
            action.type = number(action.type, lo, hi)


class Bounded:
    """An argparse type for `kind` within TOOL's limits for OPTION.

    The limits are read when first needed, not when the parser is built:
    `veloz --help` runs no C tool. `bounds` is what number() offers
    (tests/cli generates its bad values from it).
    """

    def __init__(self, kind: type, tool: str, option: str) -> None:
        self.kind, self.tool, self.option = kind, tool, option
        self.__name__ = kind.__name__  # argparse's "invalid int value" wording

    @property
    def bounds(self) -> tuple[type, int | float, int | float]:
        lo, hi = options.limits(self.tool, self.option)
        return self.kind, lo, hi

    def __call__(self, text: str) -> int | float:
        _, lo, hi = self.bounds
        return number(self.kind, lo, hi)(text)
