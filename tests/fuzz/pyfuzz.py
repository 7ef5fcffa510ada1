"""The driver the Python fuzz targets share (atheris: libFuzzer for Python).

A target is a function of one input that returns "accepted" or "refused"
(veloz's own VelozError) and raises anything else; libFuzzer reports such an
exception as a crash, with the traceback, and writes the input to
ARTIFACT_PREFIXcrash-*. run() writes the target's seeds, fuzzes for the
given seconds and prints one line: how many inputs, how many accepted.

    python tests/fuzz/fuzz_X.py [--seconds S] [--runs N] [--seeds DIR] [LIBFUZZER-ARGS] [CORPUS...]
    python tests/fuzz/fuzz_X.py crash-...     # replay one input

--seconds defaults to $FUZZ_SECONDS (the Makefile's), else 10; --runs (make
fuzz-long's) ends it sooner, after N inputs. With
--seeds, the target's dictionary (its keywords) goes beside them, DIR.dict.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

import atheris

Target = Callable[[bytes], str]


def write_seeds(seeds: Iterable[bytes], out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    for seed in seeds:
        (out / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
        n += 1
    return n


def write_dict(tokens: Iterable[str], out: Path) -> None:
    """A libFuzzer dictionary: words the mutator splices in whole."""
    lines = []
    for token in tokens:
        text = "".join(
            chr(b) if 0x20 <= b < 0x7F and b not in b'"\\' else f"\\x{b:02x}"
            for b in token.encode()
        )
        lines.append(f'"{text}"\n')
    out.write_text("".join(lines))


def workdir(prefix: str) -> Path:
    """A directory for the files a target writes and reads back once per input:
    on tmpfs when there is one. On ext4 each rewrite of a file cost ~1 ms
    (truncating a file with blocks allocates and flushes them), most of
    fuzz-route-file's time."""
    shm = Path("/dev/shm")
    where = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    # run() removes it, but a merge or a crash ends in libFuzzer's exit(),
    # which skips Python's cleanup: the owner's pid is in the name, and a
    # directory whose owner is gone is removed by the next target to start
    for old in where.glob(f"{prefix}*-*"):
        pid = old.name[len(prefix) :].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=where))


def run(
    name: str,
    target: Target,
    seeds: Iterable[bytes],
    what: str = "inputs",
    tokens: Iterable[str] = (),
    workdir: Path | None = None,
) -> None:
    """Fuzz target until --seconds pass; workdir (the target's files) is
    removed at the end, which libFuzzer's own exit would skip."""
    p = argparse.ArgumentParser(prog=name, allow_abbrev=False)
    p.add_argument("--seconds", type=int, default=int(os.environ.get("FUZZ_SECONDS", "10")))
    p.add_argument("--runs", type=int, default=0, help="stop after this many inputs (0: no limit)")
    p.add_argument("--seeds", type=Path, help="write the seeds here and fuzz from them too")
    args, rest = p.parse_known_args()
    if args.seconds < 1 or args.runs < 0:
        p.error("--seconds must be at least 1 and --runs not negative")
    if args.seeds is not None:
        write_seeds(seeds, args.seeds)
        rest.append(str(args.seeds))
        if tokens and not any(a.startswith("-dict=") for a in rest):
            words = args.seeds.with_name(args.seeds.name + ".dict")
            write_dict(tokens, words)
            rest.append(f"-dict={words}")

    counts: Counter[str] = Counter()
    deadline = time.monotonic() + args.seconds

    def one(data: bytes) -> None:
        counts[target(data)] += 1
        if time.monotonic() >= deadline or sum(counts.values()) == args.runs:
            # libFuzzer's own exit skips Python's; this line is the summary
            total = sum(counts.values())
            print(f"{name}: {total} {what}, {counts['accepted']} accepted and checked, "
                  f"{counts['refused']} refused with VelozError, nothing else raised",
                  flush=True)  # fmt: skip
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)
            os._exit(0)

    # libFuzzer's own limit only backs up the deadline above (a slow input).
    # A merge (-merge=1) runs argv[0] again through sh, with every flag: the
    # script is not executable by itself, so argv[0] is this interpreter and
    # the script, and our own flags go along in the --flag=value form
    # libFuzzer passes through untouched.
    argv = [shlex.join([sys.executable, sys.argv[0]]), f"--seconds={args.seconds}",
            f"--runs={args.runs}", f"-max_total_time={args.seconds + 60}", "-timeout=30",
            *rest]  # fmt: skip
    atheris.Setup(argv, one)
    atheris.Fuzz()
