# SPDX-License-Identifier: BSD-2-Clause
"""The Debian package (`make deb`), installed into a clean Debian 12 root.

`make deb` builds build-deb/veloz_VERSION_amd64.deb ($VELOZ_DEB names one
built already, e.g. by `make deb` earlier in the same run). A minimal
Debian 12 root (debootstrap --variant=minbase, from the Debian mirror; the
first run keeps it as build-deb/bookworm-minbase.tar, and the .debs apt
downloads in build-deb/apt-archives) gets the package's dependencies from
the mirror, and then the package by `apt-get install ./veloz_*.deb`. In
that root, with /proc, /sys (read-only) and /dev from the host: --version,
`veloz nfs`, and a pcap through the router on its native build and under
BPF_PROG_TEST_RUN. Then `apt-get purge veloz` must leave the root's files
as they were before the package came: nothing of it left, nothing else
taken. Only the Debian mirror is contacted. Needs root (chroot, mounts).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from veloz.core import version

REPO = Path(__file__).resolve().parents[2]
DEB_DIR = REPO / "build-deb"
ROOT_TAR = DEB_DIR / "bookworm-minbase.tar"
APT_CACHE = DEB_DIR / "apt-archives"
MIRROR = "http://deb.debian.org/debian"
PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# not the root's files: mounted from the host, or scratch
NOT_FILES = ("proc", "sys", "dev", "run", "tmp", "var/cache/apt")
# dpkg's and apt's own records of what they did
STATE = ("var/lib/dpkg/", "var/lib/apt/", "var/log/", "var/cache/debconf/",
         "var/cache/ldconfig/", "etc/ld.so.cache")  # fmt: skip

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chroot, mounts)"),
    pytest.mark.timeout(900),
]

ROUTER = """\
local = ["198.18.0.1"]
[[route]]
prefix = "198.18.64.0/18"
via = "198.18.1.2"
port = 1
[[neighbour]]
address = "198.18.1.2"
mac = "02:00:00:00:01:02"
"""


def _run(cmd: list[str], timeout: float = 600, **kw: object) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **kw)


def _ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, f"{done.args}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _project_version() -> str:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def _deb() -> Path:
    if os.environ.get("VELOZ_DEB"):
        return Path(os.environ["VELOZ_DEB"])
    _ok(_run(["make", "-C", str(REPO), "deb", f"DEB_DIR={DEB_DIR}"], timeout=900))
    return DEB_DIR / f"veloz_{_project_version()}_amd64.deb"


def _mounted_under(root: Path) -> list[str]:
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    return [m for m in mounts if m == str(root) or m.startswith(f"{root}/")]


def _unmount_all(root: Path) -> None:
    """Everything mounted in root, deepest first; raise if any stays."""
    for m in sorted(_mounted_under(root), key=len, reverse=True):
        if _run(["umount", m]).returncode != 0:
            _run(["umount", "-l", m])
    left = _mounted_under(root)
    assert not left, f"still mounted: {left}"


def _make_root(root: Path) -> None:
    """A fresh minbase root, from the cached tarball when there is one."""
    root.mkdir(parents=True)
    if ROOT_TAR.is_file():
        _ok(_run(["tar", "--numeric-owner", "-C", str(root), "-xf", str(ROOT_TAR)]))
        return
    _ok(_run(["debootstrap", "--variant=minbase", "bookworm", str(root), MIRROR], timeout=900))
    partial = ROOT_TAR.with_suffix(".tar.part")
    _ok(_run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(partial), "."]))
    partial.rename(ROOT_TAR)


def _mount(root: Path) -> None:
    _ok(_run(["mount", "-t", "proc", "proc", str(root / "proc")]))
    _ok(_run(["mount", "--bind", "/sys", str(root / "sys")]))
    _ok(_run(["mount", "-o", "remount,bind,ro", str(root / "sys")]))
    _ok(_run(["mount", "--bind", "/dev", str(root / "dev")]))
    APT_CACHE.mkdir(parents=True, exist_ok=True)
    _ok(_run(["mount", "--bind", str(APT_CACHE), str(root / "var/cache/apt/archives")]))


def chroot(root: Path, *cmd: str, env: tuple[str, ...] = (),
           timeout: float = 600) -> subprocess.CompletedProcess:  # fmt: skip
    base = [f"PATH={PATH}", "HOME=/root", "LANG=C.UTF-8", "DEBIAN_FRONTEND=noninteractive"]
    return _run(["chroot", str(root), "env", "-i", *base, *env, *cmd], timeout=timeout)


def files(root: Path) -> set[str]:
    """Every file, directory and link in root, relative, but NOT_FILES."""
    found: set[str] = set()
    for top, dirs, names in os.walk(root):
        rel = os.path.relpath(top, root)
        rel = "" if rel == "." else rel + "/"
        dirs[:] = [d for d in dirs if rel + d not in NOT_FILES]
        found.update(rel + n for n in [*dirs, *names])
    return found


def _apt_install(root: Path, deb: Path) -> set[str]:
    """The package's dependencies, then the package; the root's files
    in between (what purging the package must bring back)."""
    _ok(chroot(root, "apt-get", "update", "-q"))
    depends = _ok(_run(["dpkg-deb", "-f", str(deb), "Depends"])).strip()
    _ok(chroot(root, "apt-get", "satisfy", "-y", "-q", "--no-install-recommends", depends,
               timeout=900))  # fmt: skip
    shutil.copy(deb, root / "tmp" / deb.name)
    before = files(root)
    _ok(chroot(root, "apt-get", "install", "-y", "-q", "--no-install-recommends",
               f"/tmp/{deb.name}"))  # fmt: skip
    return before


@pytest.fixture(scope="module")
def inst() -> Iterator[dict]:
    deb = _deb()
    assert deb.is_file(), deb
    root = DEB_DIR / "root"
    if root.exists():  # a run that was killed
        _unmount_all(root)
        shutil.rmtree(root)
    _make_root(root)
    try:
        _mount(root)
        before = _apt_install(root, deb)
        yield {"root": root, "deb": deb, "before": before}
    finally:
        _unmount_all(root)
        shutil.rmtree(root)


def veloz(inst: dict, *args: str) -> str:
    return _ok(chroot(inst["root"], "veloz", *args))


def test_version_is_the_projects_and_names_the_commit(inst: dict) -> None:
    line = veloz(inst, "--version").strip()
    m = re.fullmatch(r"veloz (\S+) \(commit ([0-9a-f]{12}(?:-dirty)?)\)", line)
    assert m, line
    assert m.group(1) == _project_version() == version.version()
    if "VELOZ_DEB" not in os.environ:  # built just now, from this checkout
        assert m.group(2) == version.git_commit(REPO)


def test_nfs_are_found_where_the_package_put_them(inst: dict) -> None:
    names = {n["name"] for n in json.loads(veloz(inst, "nfs", "--json"))}
    assert {"drop", "tx", "router", "lb", "ddos"} <= names
    code = "from veloz.core import paths; print(paths.tool('vz-replay'), paths.nf('router').bpf)"
    tool, nf = _ok(chroot(inst["root"], "python3", "-c", code)).split()
    assert tool == "/usr/libexec/veloz/vz-replay"
    assert nf == "/usr/lib/x86_64-linux-gnu/veloz/nf/router.bpf.o"


def _pcap(path: Path) -> None:
    from scapy.all import IP, UDP, Ether, Raw, wrpcap

    eth = Ether(src="02:00:00:00:00:99", dst="02:00:00:00:00:01")
    dsts = ("198.18.64.5", "198.18.0.1", "10.1.2.3")  # routed, local, no route
    wrpcap(str(path), [eth / IP(src="198.18.0.9", dst=d) / UDP() / Raw(b"x" * 18) for d in dsts])


def test_replay_through_the_router_native_and_xdp(inst: dict) -> None:
    from scapy.all import IP, Ether, rdpcap

    work = inst["root"] / "tmp" / "replay"
    work.mkdir()
    _pcap(work / "in.pcap")
    (work / "router.toml").write_text(ROUTER)
    sent = {}
    for backend in ("native", "xdp"):
        out = veloz(inst, "replay", "router", "--backend", backend, "--in", "/tmp/replay/in.pcap",
                    "--out", f"/tmp/replay/{backend}.pcap", "--config",
                    "/tmp/replay/router.toml", "--json")  # fmt: skip
        records = [json.loads(line) for line in out.splitlines()]
        assert [r["verdict"] for r in records[:-1]] == ["redirect", "pass", "pass"], out
        assert records[-1]["backend"] == backend and records[-1]["written"] == 1
        sent[backend] = (work / f"{backend}.pcap").read_bytes()
        (frame,) = rdpcap(str(work / f"{backend}.pcap"))
        assert frame[Ether].dst == "02:00:00:00:01:02" and frame[IP].ttl == 63
    assert sent["native"] == sent["xdp"]


# Both kinds of plot `veloz report` draws, every part of each (bars with
# their CI, every trial's box and dots, lines with a band), on a log scale
PLOTS = """
import json, sys
from veloz.lab import report
bars = {"kind": "bar", "series": [
    {"label": "a", "x": ["64", "1500"], "y": [1.0, 2.0], "low": [0.9, 1.8], "high": [1.1, 2.2]},
    {"label": "b", "x": ["64", "1500"], "y": [1.5, 2.5], "points": [[1.4, 1.5, 1.6], [2.5]]}]}
lines = {"kind": "line", "xscale": "log", "yscale": "log", "series": [
    {"label": "c", "x": [1, 10, 100], "y": [5.0, 6.0, 7.0], "low": [4.0, 5.0, 6.0],
     "high": [6.0, 7.0, 8.0], "points": [[1, 5.1], [10, 5.9]]}]}
import matplotlib
print(json.dumps([matplotlib.__version__] + [len(report.plot_png(p, "t")) for p in (bars, lines)]))
"""


def test_report_plots_with_debians_matplotlib(inst: dict) -> None:
    # matplotlib's cache in /tmp: a user's home is not the package's
    out = _ok(chroot(inst["root"], "python3", "-c", PLOTS, env=("MPLCONFIGDIR=/tmp/mpl",)))
    mpl, *sizes = json.loads(out)
    assert mpl.startswith("3.6."), mpl  # Debian 12's, older than pyproject.toml asks for
    assert all(size > 1000 for size in sizes), sizes


def _listed(root: Path) -> set[str]:
    return set(_ok(chroot(root, "dpkg", "-L", "veloz")).split())


def test_the_package_holds_what_the_issue_lists(inst: dict) -> None:
    from veloz.cli import build_parser, docs

    listed = _listed(inst["root"])
    man = "/usr/share/man/man1"
    pages = {f"{man}/veloz.1.gz"} | {
        f"{man}/veloz-{name}.1.gz" for name in docs.subcommands(build_parser())
    }
    want = pages | {
        "/usr/bin/veloz", "/usr/libexec/veloz/vz-replay", "/usr/libexec/veloz/vz-xdp",
        "/usr/libexec/veloz/gen.bpf.o", "/usr/lib/x86_64-linux-gnu/veloz/nf/drop.so",
        "/usr/lib/x86_64-linux-gnu/veloz/nf/drop.bpf.o", "/usr/include/veloz/nf.h",
        "/usr/include/veloz/proto/ipv4.h", "/usr/lib/x86_64-linux-gnu/pkgconfig/veloz.pc",
        "/usr/share/bash-completion/completions/veloz", "/usr/share/veloz/grafana/veloz.json",
        "/usr/share/veloz/prometheus/veloz-rules.yml",
        "/usr/lib/python3/dist-packages/veloz/cli/__init__.py",
    }  # fmt: skip
    assert want <= listed, sorted(want - listed)
    # systemd units, when the tree has them: shipped, neither enabled nor started
    units = sorted(p.name for p in (REPO / "install").glob("*/*.service"))
    for unit in units:
        assert {f"/usr/lib/systemd/system/{unit}", f"/lib/systemd/system/{unit}"} & listed, unit
    wants = inst["root"] / "etc" / "systemd" / "system"
    assert not [p for p in wants.glob("*/*") if p.name.startswith("veloz")]


def test_purge_leaves_the_root_as_it_was(inst: dict) -> None:
    root = inst["root"]
    came = files(root) - inst["before"]
    # what the comparison must see go: the package's files, and the bytecode
    # compiled when it was installed
    assert {"usr/bin/veloz", "usr/lib/python3/dist-packages/veloz/cli/__pycache__"} <= came
    _ok(chroot(root, "apt-get", "purge", "-y", "-q", "veloz"))
    assert chroot(root, "dpkg", "-s", "veloz").returncode != 0
    after = files(root)

    def mine(paths: set[str]) -> list[str]:
        return sorted(p for p in paths if not p.startswith(STATE))

    assert mine(after - inst["before"]) == [], "left behind by the package"
    assert mine(inst["before"] - after) == [], "taken away by the package"
    assert not (root / "usr/lib/python3/dist-packages/veloz").exists()
