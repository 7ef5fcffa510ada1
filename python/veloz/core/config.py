"""NF configuration files.

A config file is TOML whose top-level keys are the fields of the NF's config
struct (see include/veloz/abi.h), e.g. for memaccess:

    accesses = 400

Values are integers or booleans; a field naming a port (redirect's `port`)
may also be the name of one of the run's interfaces. The C tools check the
names and ranges against the NF itself (its BTF and VZ_CONFIG_CHECK) before
anything is attached, so here we only parse and translate.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence

from veloz.core import safeio
from veloz.core.errors import VelozError

# Fields whose value may be an interface name, translated to its port number.
PORT_FIELDS = frozenset({"port"})


def load(path: str | None) -> dict[str, object]:
    if path is None:
        return {}
    text = safeio.read_text(path, "--config")  # bounded: not /dev/zero whole
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise VelozError(f"config file {path}: {e}") from None
    except RecursionError:  # tomllib recurses into nested arrays and tables
        raise VelozError(f"config file {path}: arrays or tables nested too deeply") from None
    return data


def parse_sets(sets: Sequence[str] | None) -> dict[str, object]:
    """--set key=value pairs from the command line."""
    values: dict[str, object] = {}
    for item in sets or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise VelozError(f"--set takes key=value, not '{item}'")
        values[key.strip()] = value.strip()
    return values


def to_assignments(values: dict[str, object], ports: Sequence[str] = ()) -> list[str]:
    """key=value strings for the C tools; interface names become port numbers."""
    out = []
    for key, value in values.items():
        # a field's name, as the NF's C struct has it: an empty key or one
        # with "=" in it would make an assignment of another field (found by
        # fuzz-py-config: ''=7)
        if not (key.isascii() and key.isidentifier()):
            raise VelozError(f"config key {key!r}: not a field name (letters, digits and _)")
        if isinstance(value, bool):
            text = "1" if value else "0"
        elif isinstance(value, int):
            text = str(value)
        elif isinstance(value, str):
            text = value
            if key in PORT_FIELDS and value in ports:
                text = str(list(ports).index(value))
            elif not is_integer(value):
                hint = f" or one of the ports ({', '.join(ports)})" if ports else ""
                raise VelozError(f"config key '{key}': '{value}' is not an integer{hint}")
        else:
            raise VelozError(
                f"config key '{key}': expected an integer, not a {type(value).__name__}"
            )
        out.append(f"{key}={text}")
    return out


def is_integer(text: str) -> bool:
    try:
        int(text, 0)
    except ValueError:
        return False
    return True
