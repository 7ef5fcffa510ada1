"""`veloz udpd --config`: the config is checked whole, in TOML or INI, and
turned into vz-udpd's arguments; bad input is one line and exit 2."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from veloz.control import udpd
from veloz.core.errors import VelozError

GOOD = """
interface = "dut-gen"
ipv4 = "198.18.0.3/24"
gateway = "198.18.0.254"
mtu = 1500
cpu = 1
rcvbuf = 65536
skb_mode = true
[[neighbour]]
ip = "198.18.0.1"
mac = "C6:12:00:00:00:01"
"""


def argv_of(tmp_path, text: str, name: str = "udpd.toml") -> list[str]:
    f = tmp_path / name
    f.write_text(text)
    return udpd.to_argv(udpd.load(str(f)), str(f))


def test_toml_becomes_vz_udpd_arguments(tmp_path):
    argv = argv_of(tmp_path, GOOD)
    assert argv[:4] == ["--iface", "dut-gen", "--ip", "198.18.0.3/24"]
    pairs = dict(zip(argv[::1], argv[1::1], strict=False))
    assert pairs["--gateway"] == "198.18.0.254" and pairs["--mtu"] == "1500"
    assert pairs["--rcvbuf"] == "65536" and pairs["--cpu"] == "1"
    assert "--skb-mode" in argv and "--copy" not in argv
    assert pairs["--neigh"] == "198.18.0.1=c6:12:00:00:00:01"


def test_ini_with_the_same_keys(tmp_path):
    ini = ("[udpd]\ninterface = dut-gen\nipv4 = 198.18.0.3/24\nmtu = 1400\ncopy = yes\n"
           "neighbours = 198.18.0.1=c6:12:00:00:00:01, 198.18.0.9=02:00:00:00:00:09\n")  # fmt: skip
    argv = argv_of(tmp_path, ini, "udpd.ini")
    assert "--copy" in argv and argv[argv.index("--mtu") + 1] == "1400"
    assert argv.count("--neigh") == 2


@pytest.mark.parametrize(
    "change, message",
    [
        ('ipv4 = "198.18.0.3"', "prefix length"),
        ('ipv4 = "224.0.0.1/24"', "not a unicast"),
        ('ipv4 = "198.18.0.300/24"', "ipv4"),
        ('gateway = "198.19.0.1"', "is not on 198.18.0.0/24"),
        ("mtu = 100", "mtu must be a whole number in 576..9000"),
        ("mtu = true", "mtu must be"),
        ('mac = "01:00:5e:00:00:01"', "multicast MAC"),
        ('mac = "zz"', "not a MAC"),
        ("skb_mode = 1", "true or false"),
        ('socket = "relative.sock"', "absolute path"),
        ('interface = "a very long name!"', "not an interface name"),
        ("colour = 1", "unknown key 'colour'"),
        ('ipv6 = "fd00:198:18::3"', "give the prefix length"),
        ('ipv6 = "ff02::1/64"', "not a unicast"),
        ('ipv6 = "fe80::3/64"', "link-local"),
        ('ipv6 = "198.18.0.3/24"', "ipv6: expected an address"),
        ('gateway6 = "fe80::1"', "gateway6 needs ipv6"),
        ('ipv4 = "198.18.0.0/24"', "network or broadcast address"),
        ('ipv4 = "198.18.0.255/24"', "network or broadcast address"),
        # found by tests/fuzz/fuzz_py_config.py: a trailing newline passed the
        # checks, a NUL made os.execv raise ValueError
        ('interface = "dut-gen\\n"', "not an interface name"),
        ('mac = "02:00:00:00:00:03\\n"', "not a MAC"),
        ('socket = "/run/veloz/u\\u0000.sock"', "socket has a NUL"),
        ('group = "veloz\\u0000"', "group has a NUL"),
    ],
)
def test_bad_values_refused_with_one_line(tmp_path, change, message):
    key = change.split("=")[0].strip()
    lines = [ln for ln in GOOD.splitlines() if not ln.startswith(key + " ")]
    text = "\n".join([change] + lines)
    with pytest.raises(VelozError) as e:
        argv_of(tmp_path, text)
    assert message in str(e.value) and "\n" not in str(e.value) and e.value.code == 2


def test_ipv6_becomes_ip6_and_is_checked(tmp_path):
    # before GOOD: keys after its [[neighbour]] would belong to that table
    argv = argv_of(tmp_path, 'ipv6 = "fd00:198:18:0::3/64"\ngateway6 = "fe80::1"\n' + GOOD)
    pairs = dict(zip(argv[::1], argv[1::1], strict=False))
    assert pairs["--ip6"] == "fd00:198:18::3/64" and pairs["--gateway6"] == "fe80::1"
    for extra, message in (('ipv6 = "fd00:198:18::3/64"\ngateway6 = "fd00:1::1"\n',
                            "neither link-local nor on fd00:198:18::/64"),
                           ('ipv6 = "fd00:198:18::3/64"\nmtu = 1000\n', "IPv6 needs at least 1280"),
                           ):  # fmt: skip
        text = "\n".join(ln for ln in GOOD.splitlines() if not ln.startswith("mtu")) + "\n"
        with pytest.raises(VelozError, match=message) as e:
            argv_of(tmp_path, extra + text)
        assert e.value.code == 2


def test_missing_required_and_bad_syntax(tmp_path):
    with pytest.raises(VelozError, match="interface is required"):
        argv_of(tmp_path, 'ipv4 = "198.18.0.3/24"\n')
    with pytest.raises(VelozError, match="not valid TOML"):
        argv_of(tmp_path, "ipv4 = \n")
    with pytest.raises(VelozError, match=r"one section, \[udpd\]"):
        argv_of(tmp_path, "[other]\na = 1\n", "x.ini")
    with pytest.raises(VelozError, match="each \\[\\[neighbour\\]\\] has ip and mac"):
        argv_of(tmp_path, GOOD + '[[neighbour]]\nip = "198.18.0.2"\n')


def test_veloz_udpd_check_and_errors_on_the_command_line(tmp_path):
    good = tmp_path / "u.toml"
    # --check also checks the host: an interface that is here (cpu 0 is online)
    good.write_text(GOOD.replace('"dut-gen"', '"lo"').replace("cpu = 1", "cpu = 0"))
    done = subprocess.run([sys.executable, "-m", "veloz.cli", "udpd", "--config", str(good),
                           "--check"], capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0 and "ok" in done.stdout
    bad = tmp_path / "b.toml"
    bad.write_text('interface = "x"\nipv4 = "1.2.3.4/33"\n')
    done = subprocess.run([sys.executable, "-m", "veloz.cli", "udpd", "--config", str(bad)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1


def test_unreadable_text_refused(tmp_path):
    # found by tests/fuzz/fuzz_py_config.py: UnicodeDecodeError, RecursionError
    for name in ("u.toml", "u.ini"):
        f = tmp_path / name
        f.write_bytes(GOOD.encode() + b"# \xff\n")
        with pytest.raises(VelozError, match="not UTF-8") as e:
            udpd.load(str(f))
        assert e.value.code == 2
    with pytest.raises(VelozError, match="nested too deeply"):
        argv_of(tmp_path, "neighbour = " + "[" * 5000 + "\n")


def test_check_host_mtu_and_address(tmp_path, monkeypatch):
    """--check refuses what the host would make go wrong: an mtu above the
    link's (frames that would not leave it; the default 1500 too), and an
    address the kernel already has here."""
    cfg = tomllib.loads(GOOD.replace('"dut-gen"', '"lo"').replace("cpu = 1", "cpu = 0"))
    cfg["socket"] = str(tmp_path / "u.sock")
    udpd.check_host(cfg, "u.toml")  # lo: MTU 65536
    monkeypatch.setattr(udpd, "_link_mtu", lambda iface: 1400)
    with pytest.raises(VelozError, match="mtu: 1500 is above lo's MTU 1400"):
        udpd.check_host(cfg, "u.toml")
    del cfg["mtu"]
    with pytest.raises(VelozError, match="mtu: 1500 is above"):
        udpd.check_host(cfg, "u.toml")
    cfg["mtu"] = 1400
    udpd.check_host(cfg, "u.toml")
    # 127.0.0.1 is refused by the parser (not unicast); the test of the
    # host is the bind: a loopback address is the kernel's
    cfg["ipv4"] = "127.0.0.1/8"
    with pytest.raises(VelozError, match="the kernel has 127.0.0.1 already"):
        udpd.check_host(cfg, "u.toml")
