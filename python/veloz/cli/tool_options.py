"""argparse options made from a C tool's option table (veloz.core.options).

An option a C tool owns is declared once, in the tool's table
(src/common/options.h): its help, type, bounds, choices and default. The
commands that hand it to the tool (`veloz run`, `veloz gen`, `veloz dump`)
build their argparse option from that row, so the two never disagree.
"""

from __future__ import annotations

import argparse
from typing import Any

from veloz.core import options, safeio

TABLE = object()  # default=TABLE: the row's own default


# a u64's range is said in its help up to here; past it, "any" is the truth
SAID_MAX = 1 << 32


def help_text(row: dict[str, Any]) -> str:
    """The row's help, with its range and default when worth saying."""
    said = []
    if row["type"] == "u64" and row["max"] < SAID_MAX:
        said.append(f"{row['min']}-{row['max']}")
    if row["default"] not in (None, False):
        said.append(f"default {row['default']}")
    text = row["help"]
    if not said:
        return text
    if text.endswith(")"):  # one parenthesis, not two in a row
        return f"{text[:-1]}; {', '.join(said)})"
    return f"{text} ({', '.join(said)})"


def add(where: argparse._ActionsContainer, tool: str, row: dict[str, Any], *,
        flags: tuple[str, ...] = (), default: Any = TABLE, text: str | None = None,
        bounded: bool = True) -> argparse.Action:  # fmt: skip
    """Add ROW of TOOL's table to WHERE as `--NAME` (or FLAGS).

    default: the row's unless given (argparse.SUPPRESS: absent unless
    given; None: given or not, the tool's default applies). bounded=False
    leaves a u64 a plain int, for safeio.bound_numbers and the command to
    check against the table."""
    flags = flags or (f"--{row['name']}",)
    text = text if text is not None else help_text(row)
    value = row["default"] if default is TABLE else default
    # a long flag names the attribute, as argparse does; a short one alone
    # would name it "c": then the row does (-c is the row "count": args.count)
    long = [f for f in flags if f.startswith("--")]
    dest = long[0][2:] if long else row["name"]
    dest = dest.replace("-", "_")
    if row["type"] == "flag":
        return where.add_argument(*flags, action="store_true", default=value, help=text,
                                  dest=dest)  # fmt: skip
    kw: dict[str, Any] = {"dest": dest}
    if row["type"] == "u64":
        kw["type"] = safeio.Bounded(int, tool, f"--{row['name']}") if bounded else int
    elif row["type"] == "seconds":
        kw["type"] = float  # safeio.bound_numbers bounds it
    if "choices" in row:
        kw["choices"] = row["choices"]
    if row["required"]:
        kw["required"] = True
    return where.add_argument(*flags, default=value, metavar=row["metavar"], help=text, **kw)


def add_from(
    where: argparse._ActionsContainer, tool: str, names: tuple[str, ...], **kw: Any
) -> None:
    """Add each of NAMES from TOOL's table, in that order."""
    table = options.table(tool)
    for name in names:
        add(where, tool, table[name], **kw)
