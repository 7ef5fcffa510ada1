# SPDX-License-Identifier: BSD-2-Clause
"""`make fuzz-long`: every fuzz target, deep, one at a time, outside CI.

Each target runs toward --runs executions (OSS-Fuzz asks 10^7 before a
parser is trusted) or --seconds, whichever comes first (a SIGINT to the
fuzzer also ends it cleanly, for a deadline), under nice -n 19, from its
corpus kept in the repository (tests/fuzz/corpus/TARGET) and its generated
seeds. Then the corpus is minimised (libFuzzer -merge=1, which
atheris shares) back into the repository, so CI's short `make fuzz` runs
start where the campaign ended. A finding stops that target; its input is
kept as build-fuzz/long/TARGET-crash-* to become a regression input (in
tests/fuzz/regressions/TARGET) once fixed.

The report, per target: executions, seconds, executions per second,
coverage (libFuzzer's `cov`: edges, and `ft`: features) at the end, corpus
files before and after the merge, and the finding if any. It is printed as
a table and written to build-fuzz/fuzz-long.json.

    python tests/fuzz/campaign.py [--build build-fuzz] [--runs 10000000]
        [--seconds 3600] [TARGET ...]          # default: every target
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPORA = REPO / "tests" / "fuzz" / "corpus"
REGRESSIONS = REPO / "tests" / "fuzz" / "regressions"

NFS = ("drop", "pass", "tx", "redirect", "memaccess", "headroom", "router", "ddos", "lb")
CTL_NFS = ("router", "ddos", "lb")
NF_SETS = {"memaccess": "accesses=64", "redirect": "port=5", "headroom": "delta=-20"}


@dataclass
class Target:
    name: str
    argv: list[str]  # the binary (or python script) and its fixed arguments
    env: dict[str, str] = field(default_factory=dict)
    seeds: list[Path] = field(default_factory=list)
    python: bool = False  # atheris: runs by time only, and -merge via libFuzzer's flag


def targets(build: Path) -> list[Target]:
    """The same targets, environments and seeds as the Makefile's `fuzz`."""
    out = []
    for nf in NFS:
        nf_dir = build / "nf" if (build / "nf" / f"{nf}.so").exists() else build / "tests" / "nf"
        ops = build / "ops" / f"{nf}.ops"
        env = {"VZ_FUZZ_NF": nf, "VZ_FUZZ_NF_DIR": str(nf_dir),
               "VZ_FUZZ_OPS": str(ops) if ops.exists() else "",
               "VZ_FUZZ_SET": NF_SETS.get(nf, "")}  # fmt: skip
        out.append(Target(f"nf-{nf}", [str(build / "tests/fuzz/fuzz-nf-diff"), "-max_len=9216"],
                          env, [build / "seeds" / "frames"]))  # fmt: skip
    out.append(Target("config", [str(build / "tests/fuzz/fuzz-config")],
                      {"VZ_FUZZ_NF": "memaccess", "VZ_FUZZ_NF_DIR": str(build / "nf")},
                      [build / "seeds" / "config"]))  # fmt: skip
    for nf in CTL_NFS:
        env = {"VZ_FUZZ_NF": nf, "VZ_FUZZ_NF_DIR": str(build / "nf"),
               "VZ_FUZZ_OPS": str(build / "ops" / f"{nf}.ops")}  # fmt: skip
        seeds = [build / "ops" / f"ctl-{nf}"]
        out.append(Target(f"ctl-{nf}", [str(build / "tests/fuzz/fuzz-ctl"), "-max_len=4096"],
                          env, seeds))  # fmt: skip
    out.append(Target("stack", [str(build / "tests/fuzz/fuzz-stack"), "-max_len=16384"],
                      seeds=[build / "seeds" / "stack"]))  # fmt: skip
    out.append(Target("sock-ctl", [str(build / "tests/fuzz/fuzz-sock-ctl"), "-max_len=4096"]))
    for t in ("route-file", "py-config"):
        script = REPO / "tests" / "fuzz" / f"fuzz_{t.replace('-', '_')}.py"
        # pyfuzz writes its seeds (and dictionary) into --seeds itself
        out.append(Target(t, [sys.executable, str(script), "--seeds", str(build / "seeds" / t),
                              "-max_len=4096"], python=True))  # fmt: skip
    return out


@dataclass
class Result:
    target: str
    executions: int = 0
    seconds: float = 0.0
    exec_per_s: float = 0.0
    cov: int | None = None
    ft: int | None = None
    corpus_before: int = 0
    corpus_after: int = 0
    finding: str | None = None


def _count(d: Path) -> int:
    return sum(1 for p in d.iterdir() if p.is_file()) if d.is_dir() else 0


def _stats(log: str) -> tuple[int, int | None, int | None]:
    execs = re.findall(r"stat::number_of_executed_units: (\d+)", log)
    progress = re.findall(r"^#(\d+)\s+\S+\s+cov: (\d+) ft: (\d+)", log, re.M)
    n = int(execs[-1]) if execs else (int(progress[-1][0]) if progress else 0)
    cov, ft = (int(progress[-1][1]), int(progress[-1][2])) if progress else (None, None)
    return n, cov, ft


def run_one(t: Target, build: Path, runs: int, seconds: int) -> Result:
    r = Result(t.name)
    work = build / "long" / t.name  # this campaign's growing corpus
    work.mkdir(parents=True, exist_ok=True)
    corpus = CORPORA / t.name
    corpus.mkdir(parents=True, exist_ok=True)
    r.corpus_before = _count(corpus)
    env = {**os.environ, **t.env}
    # every target's fixed findings run again first (its regression inputs)
    seeds = [str(s) for s in [*t.seeds, REGRESSIONS / t.name] if s.is_dir()]
    prefix = f"-artifact_prefix={build / 'long'}/{t.name}-"
    if t.python:
        # pyfuzz counts the inputs itself, and cleans up when it stops
        cmd = [*t.argv[:2], "--seconds", str(seconds), "--runs", str(runs), *t.argv[2:],
               prefix, str(work), str(corpus), *seeds]  # fmt: skip
    else:
        cmd = [*t.argv, f"-runs={runs}", f"-max_total_time={seconds}", "-print_final_stats=1",
               prefix, str(work), str(corpus), *seeds]  # fmt: skip
    log_path = build / "long" / f"{t.name}.log"
    start = time.monotonic()
    with log_path.open("w") as log:
        done = subprocess.run(["nice", "-n", "19", *cmd], env=env, stdout=log,
                              stderr=subprocess.STDOUT, check=False)  # fmt: skip
    r.seconds = round(time.monotonic() - start, 1)
    text = log_path.read_text(errors="replace")
    r.executions, r.cov, r.ft = _stats(text)
    if t.python:  # pyfuzz prints "fuzz-NAME: N inputs, ..." itself
        m = re.search(rf"^fuzz-{re.escape(t.name)}: (\d+) ", text, re.M)
        r.executions = int(m.group(1)) if m else r.executions
    r.exec_per_s = round(r.executions / r.seconds) if r.seconds else 0
    # stopped by hand (SIGINT: libFuzzer exits 72 after its final stats;
    # atheris lets Python's KeyboardInterrupt end it, exit 130) is not a
    # finding: the executions so far count, and the corpus is kept
    interrupted = "libFuzzer: run interrupted" in text or (
        t.python and done.returncode == 130 and "KeyboardInterrupt: stopping." in text
    )
    if done.returncode != 0 and not interrupted:
        found = sorted((build / "long").glob(f"{t.name}-*"))
        r.finding = f"exit {done.returncode}: {found[-1] if found else log_path}"
        return r
    # Minimise what this run and the kept corpus hold into a fresh directory,
    # then keep that in the repository.
    fresh = build / "long" / f"{t.name}.merged"
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir()
    merge = [*t.argv, "-merge=1", str(fresh), str(corpus), str(work)]
    if t.python:  # pyfuzz's own --seconds is for fuzzing; a merge ends by itself
        merge = [*t.argv[:2], "--seconds", str(max(seconds, 3600)), *t.argv[2:], "-merge=1",
                 str(fresh), str(corpus), str(work)]  # fmt: skip
    with log_path.open("a") as log:
        m = subprocess.run(["nice", "-n", "19", *merge], env=env, stdout=log,
                           stderr=subprocess.STDOUT, check=False)  # fmt: skip
    if m.returncode == 0 and _count(fresh):
        # copied beside it first: a campaign killed here keeps a corpus
        staged = corpus.with_name(corpus.name + ".new")
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(fresh, staged)
        shutil.rmtree(corpus)
        staged.rename(corpus)
    r.corpus_after = _count(corpus)
    return r


def _merge_report(report: Path, result: dict | None) -> dict[str, dict]:
    """The report's targets with this result in: read again under a lock
    each time, since two campaigns (one per core) may share the report."""
    report.parent.mkdir(parents=True, exist_ok=True)
    with open(report.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        kept = {r["target"]: r for r in json.loads(report.read_text())} if report.exists() else {}
        if result is not None:
            kept[result["target"]] = result
            tmp = report.with_suffix(".tmp")
            tmp.write_text(json.dumps(list(kept.values()), indent=1) + "\n")
            tmp.replace(report)
    return kept


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", type=Path, default=REPO / "build-fuzz")
    p.add_argument("--runs", type=int, default=10_000_000, help="executions per target")
    p.add_argument("--seconds", type=int, default=3600, help="at most, per target")
    p.add_argument("targets", nargs="*", help="default: every target")
    args = p.parse_args()
    if args.runs < 1 or args.seconds < 1:
        p.error("--runs and --seconds must be positive")
    every = {t.name: t for t in targets(args.build.resolve())}
    unknown = [n for n in args.targets if n not in every]
    if unknown:
        p.error(f"no target {unknown[0]} (known: {', '.join(every)})")
    results = []
    report = args.build / "fuzz-long.json"
    # a campaign runs for hours, often a target or two at a time: the report
    # keeps every target's latest run, not only this invocation's
    kept = _merge_report(report, None)
    for name in args.targets or list(every):
        r = run_one(every[name], args.build.resolve(), args.runs, args.seconds)
        results.append(r)
        print(f"{r.target:16} {r.executions:>11,} execs {r.seconds:>8.0f} s "
              f"{r.exec_per_s:>7,}/s cov {r.cov} ft {r.ft} corpus {r.corpus_before}"
              f"->{r.corpus_after} {r.finding or 'no finding'}", flush=True)  # fmt: skip
        kept = _merge_report(report, asdict(r))
    reached = sum(r.executions >= args.runs for r in results)
    found = [r for r in results if r.finding]
    print(f"fuzz-long: {len(results)} targets, {reached} reached {args.runs:,} executions, "
          f"{len(found)} findings; report {report}")  # fmt: skip
    ever = sum(r["executions"] >= args.runs for r in kept.values())
    print(f"fuzz-long: the report holds {len(kept)} targets, {ever} of them past {args.runs:,}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
