"""`veloz nfs`: the NFs of this build, their config fields and maps."""

from __future__ import annotations

import argparse
import json
import subprocess

from rich.console import Console
from rich.table import Table

from veloz.core import paths
from veloz.core.errors import VelozError


def info(name: str) -> dict:
    nf = paths.nf(name)
    done = subprocess.run(
        [str(paths.tool("vz-nfinfo")), "--bpf", str(nf.bpf), "--native", str(nf.native)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise VelozError(done.stderr.strip().removeprefix("veloz: ") or f"{name}: no info", 1)
    return json.loads(done.stdout)


def run(args: argparse.Namespace) -> int:
    names = [args.nf] if args.nf else paths.available_nfs()
    infos = [info(n) for n in names]
    if args.json:
        print(json.dumps(infos, indent=2))
        return 0
    table = Table(title="NFs")
    for col in ("nf", "config (default)", "maps"):
        table.add_column(col)
    for i in infos:
        fields = ", ".join(f"{f['name']} ({f['default']})" for f in i["config"]) or "-"
        maps = ", ".join(f"{m['name']} ({m['type']})" for m in i["maps"]) or "-"
        table.add_row(i["name"], fields, maps)
    Console().print(table)
    return 0
