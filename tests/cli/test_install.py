# SPDX-License-Identifier: BSD-2-Clause
"""veloz installed, and used from outside its checkout (issue 21, install).

`meson install` of this build into a fresh temporary root (--destdir: the
install is relocatable, its tools find libveloz-rt through $ORIGIN rpaths),
the wheel built from this checkout and installed into a venv created at that
same prefix (so veloz finds its tools by its own prefix, no variable set),
and into a second venv elsewhere that names the prefix with $VELOZ_PREFIX.
Then, from a cwd outside the checkout and with none of the checkout's
variables: --version, the completion and man page, and a user's own NF
built with pkg-config's flags and with `veloz build`, replayed through its
native build (and its BPF build under BPF_PROG_TEST_RUN, as root).

The third-party dependencies (numpy, scapy...) come from the test's own
environment through a .pth file, so no package index is needed; the veloz
package itself must be the wheel's, which the test checks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from veloz.core import version

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("VELOZ_BUILD_DIR", REPO / "build"))
PYVER = f"python{sys.version_info.major}.{sys.version_info.minor}"

# A user's NF, not one of ours: frames under 100 bytes dropped, the rest
# sent back with the addresses swapped.
USER_NF = """\
/* SPDX-License-Identifier: BSD-2-Clause */
#include <veloz/nf.h>

VZ_NF(shortdrop)
{
	struct ethhdr *eth = vz_header(ctx, 0, sizeof(*eth));

	if (!eth || vz_len(ctx) < 100)
		return VZ_DROP;
	vz_eth_swap(eth);
	return VZ_TX;
}
"""


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False, **kw)


def _ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, f"{done.args}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _build_option(options: list[dict], name: str) -> str:
    return next(o["value"] for o in options if o["name"] == name)


def _venv(at: Path, wheel: Path) -> Path:
    """A venv at `at` holding the wheel; deps from this test's environment."""
    _ok(_run([sys._base_executable, "-m", "venv", "--without-pip", str(at)]))
    python = at / "bin" / "python"
    _ok(_run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
              "--no-deps", "--no-index", str(wheel)]))  # fmt: skip
    site = Path(
        _ok(
            _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
        ).strip()
    )  # noqa: E501
    (site / "zz-veloz-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return at / "bin" / "veloz"


@pytest.fixture(scope="module")
def inst(tmp_path_factory: pytest.TempPathFactory) -> dict:
    if not (BUILD / "build.ninja").is_file():
        pytest.skip(f"no meson build in {BUILD}")
    tmp = tmp_path_factory.mktemp("install")
    dest = tmp / "root"
    _ok(_run(["meson", "install", "-C", str(BUILD), "--quiet", "--destdir", str(dest)]))
    options = json.loads(_ok(_run(["meson", "introspect", str(BUILD), "--buildoptions"])))
    prefix = dest / _build_option(options, "prefix").lstrip("/")
    libdir = prefix / _build_option(options, "libdir")

    wheels = tmp / "wheels"
    _ok(_run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
              "-w", str(wheels), str(REPO)]))  # fmt: skip
    wheel = next(wheels.glob("veloz-*.whl"))

    outside = tmp / "work"
    outside.mkdir()
    # nothing that points at the checkout
    env = {k: v for k, v in os.environ.items()
           if k not in ("VELOZ_BUILD_DIR", "VELOZ_NF_PATH", "VELOZ_PREFIX", "PYTHONPATH",
                        "VIRTUAL_ENV")}  # fmt: skip
    env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    return {
        "dest": dest,
        "prefix": prefix,
        "libdir": libdir,
        "cwd": outside,
        "env": env,
        # the wheel in a venv at the install prefix: found by its own prefix
        "veloz": _venv(prefix, wheel),
        # and in a venv elsewhere, pointed at the prefix
        "veloz_elsewhere": _venv(tmp / "venv", wheel),
    }


def veloz(inst: dict, *args: str, elsewhere: bool = False) -> subprocess.CompletedProcess:
    env = dict(inst["env"])
    exe = inst["veloz_elsewhere" if elsewhere else "veloz"]
    if elsewhere:
        env["VELOZ_PREFIX"] = str(inst["prefix"])
    return _run([str(exe), *args], cwd=inst["cwd"], env=env)


def test_the_package_is_the_wheel_not_the_checkout(inst: dict) -> None:
    python = inst["prefix"] / "bin" / "python"
    where = _ok(_run([str(python), "-c", "import veloz; print(veloz.__file__)"],
                     cwd=inst["cwd"], env=inst["env"])).strip()  # fmt: skip
    assert Path(where).is_relative_to(inst["prefix"]), where


def test_version_names_the_commit_it_was_built_from(inst: dict) -> None:
    line = _ok(veloz(inst, "--version")).strip()
    m = re.fullmatch(r"veloz (\S+) \(commit ([0-9a-f]{12}(?:-dirty)?)\)", line)
    assert m, line
    assert m.group(1) == version.version()
    # baked into the wheel: the same as git says of this checkout now
    assert m.group(2) == version.git_commit(REPO)


def test_tools_and_nfs_are_found_in_the_prefix(inst: dict) -> None:
    prefix = inst["prefix"]
    for exe in ("veloz", "veloz_elsewhere"):
        code = "from veloz.core import paths; print(paths.tool('vz-replay'), paths.nf('drop').bpf)"
        python = inst[exe].parent / "python"
        env = dict(inst["env"]) | ({"VELOZ_PREFIX": str(prefix)} if exe != "veloz" else {})
        tool, nf = _ok(_run([str(python), "-c", code], cwd=inst["cwd"], env=env)).split()
        assert Path(tool).is_relative_to(prefix) and Path(nf).is_relative_to(prefix)
    # the installed tool finds the installed libveloz-rt, not the build's
    ldd = _ok(_run(["ldd", str(prefix / "libexec" / "veloz" / "vz-replay")]))
    found = re.search(r"libveloz-rt\.so => (\S+)", ldd)
    assert found, ldd
    assert Path(found.group(1)).resolve() == (inst["libdir"] / "libveloz-rt.so").resolve()
    names = {n["name"] for n in json.loads(_ok(veloz(inst, "nfs", "--json")))}
    assert {"drop", "tx", "router", "lb"} <= names


def test_completion_and_man_page_are_installed(inst: dict) -> None:
    share = inst["prefix"] / "share"
    completion = share / "bash-completion" / "completions" / "veloz"
    man = share / "man" / "man1" / "veloz.1"
    # bash accepts it and registers a completion for `veloz`
    done = _ok(_run(["bash", "-c", f"source {completion} && complete -p veloz"]))
    assert "veloz" in done
    # it completes the subcommands and options the parser has
    script = completion.read_text()
    assert "build" in script and "--backend" in script and "--version" in script
    page = man.read_text()
    assert page.startswith('.TH VELOZ "1"')
    assert "veloz build" in page and "veloz replay" in page
    if shutil.which("groff"):
        text = _ok(_run(["groff", "-man", "-Tutf8", str(man)]))
        assert "--backend" in text.replace("\u2010", "-")


def _pcap(path: Path) -> None:
    from scapy.all import IP, UDP, Ether, Raw, wrpcap

    frames = [
        Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP() / UDP() / Raw(b"x" * 10),
        Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP() / UDP() / Raw(b"x" * 200),
    ]
    wrpcap(str(path), frames)


def _replay(inst: dict, nf: str, backend: str, **kw: bool) -> tuple[list[str], bytes]:
    cwd = inst["cwd"]
    out = cwd / f"out-{backend}.pcap"
    done = _ok(veloz(inst, "replay", nf, "--backend", backend, "--in", "in.pcap",
                     "--out", str(out), "--json", **kw))  # fmt: skip
    records = [json.loads(line) for line in done.splitlines()]
    from scapy.all import rdpcap

    sent = rdpcap(str(out))
    assert len(sent) == 1
    return [r["verdict"] for r in records if "verdict" in r], bytes(sent[0])


def _check_user_nf(inst: dict, nf: str) -> None:
    verdicts, sent = _replay(inst, nf, "native")
    assert verdicts == ["drop", "tx"]
    assert sent[:12] == bytes.fromhex("020000000001020000000002")  # dst and src swapped
    if os.geteuid() == 0:  # BPF_PROG_TEST_RUN: the BPF build means the same
        assert _replay(inst, nf, "xdp") == (verdicts, sent)


def test_user_nf_built_with_pkg_config(inst: dict) -> None:
    cwd, dest = inst["cwd"], inst["dest"]
    (cwd / "shortdrop.c").write_text(USER_NF)
    _pcap(cwd / "in.pcap")
    # a destdir install: the sysroot makes veloz.pc's paths point into it
    env = dict(inst["env"], PKG_CONFIG_PATH=str(inst["libdir"] / "pkgconfig"),
               PKG_CONFIG_SYSROOT_DIR=str(dest))  # fmt: skip

    def pc(*args: str) -> list[str]:
        return _ok(_run(["pkg-config", *args, "veloz"], env=env)).split()

    assert pc("--cflags")[0] == f"-I{inst['prefix'] / 'include'}"
    _ok(_run(["clang", *pc("--variable=bpf_cflags"), *pc("--cflags"), "-Wall", "-Werror",
              "-c", "shortdrop.c", "-o", "shortdrop.bpf.o"], cwd=cwd))  # fmt: skip
    _ok(_run(["cc", "-shared", "-fPIC", "-Wall", "-Werror", *pc("--cflags"), "shortdrop.c",
              "-o", "shortdrop.so", *pc("--libs")], cwd=cwd))  # fmt: skip
    _check_user_nf(inst, "./shortdrop.bpf.o")


def test_user_nf_built_with_veloz_build(inst: dict) -> None:
    cwd = inst["cwd"]
    (cwd / "mine").mkdir()
    (cwd / "mine" / "shortdrop.c").write_text(USER_NF)
    _pcap(cwd / "in.pcap")
    out = json.loads(_ok(veloz(inst, "build", "mine/shortdrop.c", "-o", "mine", "--json")))
    names = sorted(Path(p).name for p in out["objects"])
    assert names == [
        "shortdrop.bpf.o",
        "shortdrop.cpumap.bpf.o",
        "shortdrop.dump.bpf.o",
        "shortdrop.so",
    ]
    _check_user_nf(inst, "mine/shortdrop.bpf.o")
    # and from the other venv, through $VELOZ_PREFIX
    done = _ok(veloz(inst, "replay", "mine/shortdrop.so", "--backend", "native",
                     "--in", "in.pcap", "--json", elsewhere=True))  # fmt: skip
    assert json.loads(done.splitlines()[-1])["drop"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["build", "nothere.c"], "nothere.c: no such file"),
        (["build", "shortdrop.txt"], "an NF source is NAME.c"),
        (["build", "broken.c"], "broken.c: building broken.bpf.o failed"),
        (["replay", "./nothere.bpf.o", "--backend", "native", "--in", "in.pcap"],
         "nothere.bpf.o: no such file"),
        (["replay", "./lonely.bpf.o", "--backend", "native", "--in", "in.pcap"],
         "lonely.so: no such file"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line(inst: dict, args: list[str], message: str) -> None:
    cwd = inst["cwd"]
    (cwd / "broken.c").write_text("#include <veloz/nf.h>\nthis is not C\n")
    (cwd / "lonely.bpf.o").write_bytes(b"")
    (cwd / "shortdrop.txt").write_text("")
    done = veloz(inst, *args)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]  # a compiler's diagnostics come first
    assert last.startswith("veloz: ") and message in last, done.stderr
    assert "Traceback" not in done.stderr
