"""The one reader of the NFs' ABI: the BTF of the built objects (build/nf/*.bpf.o).

Every map key and value layout, enum and map size the control plane needs is
read here from the BTF that clang wrote into NAME.bpf.o, so the C (include/
veloz/abi.h and the NF's map definitions) is the only place they are written.
Enums an NF uses only for their constants (counter indexes, actions) reach
its BTF through VZ_BTF_EXPORT (abi.h). The few plain `#define` numbers that
have no type at all (flag bits, VZ_LB_RING_SIZE) are read from abi.h itself.

The parser is ours rather than bpftool's: BTF is a flat array of typed
records (Documentation/bpf/btf.rst), the object's .BTF section holds it, and
`veloz` should not need a tool installed to read its own objects.

    LB = abi.Nf("lb")                          # nothing is read yet
    LB.layout("vz_lb_backend").pack(addr=..., vip=0, weight=1, family=4, flags=1)
    LB.map("lb_vips").max_entries              # 64
    LB.enum_names("vz_lb_counter", "VZ_LB_")   # ["malformed", ...]
"""

from __future__ import annotations

import functools
import re
import struct
from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veloz.core import paths
from veloz.core.errors import VelozError

# BTF kinds (include/uapi/linux/btf.h)
INT, PTR, ARRAY, STRUCT, UNION, ENUM, FWD, TYPEDEF = 1, 2, 3, 4, 5, 6, 7, 8
VOLATILE, CONST, RESTRICT, FUNC, FUNC_PROTO, VAR, DATASEC = 9, 10, 11, 12, 13, 14, 15
FLOAT, DECL_TAG, TYPE_TAG, ENUM64 = 16, 17, 18, 19
_MODIFIERS = (TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG)
# bytes that follow a type's 12-byte header: fixed, or per member (vlen)
_EXTRA = {INT: 4, ARRAY: 12, VAR: 4, DECL_TAG: 4}
_PER_MEMBER = {STRUCT: 12, UNION: 12, ENUM: 8, FUNC_PROTO: 8, DATASEC: 12, ENUM64: 12}
BTF_MAGIC = 0xEB9F

# enum bpf_map_type, the ones NFs declare (vz-nfinfo prints libbpf's names)
MAP_TYPES = {1: "hash", 2: "array", 5: "percpu_hash", 6: "percpu_array", 9: "lru_hash",
             11: "lpm_trie", 14: "devmap"}  # fmt: skip
# typedefs whose integers are in network order
_BIG_ENDIAN = frozenset({"__be16", "__be32", "__be64"})


@dataclass(frozen=True)
class Type:
    id: int
    kind: int
    name: str
    size: int  # or the referenced type id for PTR, TYPEDEF, VAR, FUNC...
    info: tuple  # kind-specific: members, array (elem, nelems), int encoding...


class Btf:
    """The types of one BTF blob, by id (0 is void)."""

    def __init__(self, blob: bytes, where: str = "BTF") -> None:
        if len(blob) < 24:
            raise VelozError(f"{where}: BTF too short")
        magic, _ver, _flags, hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from(
            "<HBBIIIII", blob
        )
        if magic != BTF_MAGIC:
            raise VelozError(f"{where}: not little-endian BTF (magic {magic:#x})")
        self.where = where
        strings = blob[hdr_len + str_off : hdr_len + str_off + str_len]
        self.types: list[Type | None] = [None]
        pos, end = hdr_len + type_off, hdr_len + type_off + type_len
        while pos < end:
            t, pos = self._record(blob, pos, strings)
            self.types.append(t)
        self.by_name: dict[tuple[int, str], Type] = {}
        for t in self.types[1:]:
            if t is not None and t.name:
                self.by_name.setdefault((t.kind, t.name), t)

    def _record(self, blob: bytes, pos: int, strings: bytes) -> tuple[Type, int]:
        name_off, info, size = struct.unpack_from("<III", blob, pos)
        kind, vlen, kflag = (info >> 24) & 0x1F, info & 0xFFFF, info >> 31
        body = pos + 12
        extra = _EXTRA.get(kind, 0) + _PER_MEMBER.get(kind, 0) * vlen
        name = _string(strings, name_off)
        detail: tuple = ()
        if kind == INT:
            (enc,) = struct.unpack_from("<I", blob, body)
            detail = (bool((enc >> 24) & 1), enc & 0xFF)  # signed, bits
        elif kind == ARRAY:
            detail = struct.unpack_from("<III", blob, body)  # elem, index type, nelems
        elif kind in (STRUCT, UNION):
            members = []
            for i in range(vlen):
                m_name, m_type, m_off = struct.unpack_from("<III", blob, body + 12 * i)
                bits = m_off >> 24 if kflag else 0
                members.append((_string(strings, m_name), m_type, m_off & 0xFFFFFF if kflag else
                                m_off, bits))  # fmt: skip
            detail = tuple(members)
        elif kind == ENUM:
            signed = bool(kflag)
            vals = []
            for i in range(vlen):
                e_name, val = struct.unpack_from(
                    "<I" + ("i" if signed else "I"), blob, body + 8 * i
                )
                vals.append((_string(strings, e_name), val))
            detail = tuple(vals)
        elif kind == ENUM64:
            vals = []
            for i in range(vlen):
                e_name, lo, hi = struct.unpack_from("<III", blob, body + 12 * i)
                vals.append((_string(strings, e_name), hi << 32 | lo))
            detail = tuple(vals)
        elif kind == DATASEC:
            detail = tuple(struct.unpack_from("<III", blob, body + 12 * i) for i in range(vlen))
        elif kind not in _EXTRA and kind not in _PER_MEMBER and kind > ENUM64:
            raise VelozError(f"{self.where}: unknown BTF kind {kind}")
        return Type(len(self.types), kind, name, size, detail), body + extra

    def __getitem__(self, type_id: int) -> Type:
        t = self.types[type_id]
        if t is None:
            raise VelozError(f"{self.where}: BTF type 0 (void) where a type was expected")
        return t

    def resolve(self, type_id: int) -> Type:
        """The type under typedefs and qualifiers."""
        t = self[type_id]
        while t.kind in _MODIFIERS:
            t = self[t.size]
        return t

    def sizeof(self, type_id: int) -> int:
        t = self.resolve(type_id)
        if t.kind == ARRAY:
            return t.info[2] * self.sizeof(t.info[0])
        if t.kind == PTR:
            return 8
        return t.size

    def find(self, kind: int, name: str) -> Type:
        t = self.by_name.get((kind, name))
        if t is None:
            raise VelozError(f"{self.where}: no {_KIND_NAMES.get(kind, kind)} {name} in its BTF")
        return t


_KIND_NAMES = {STRUCT: "struct", UNION: "union", ENUM: "enum", VAR: "variable", DATASEC: "section"}


def _string(strings: bytes, off: int) -> str:
    end = strings.find(b"\0", off)
    return strings[off : end if end >= 0 else len(strings)].decode()


def elf_section(data: bytes, wanted: str, where: str) -> bytes:
    """The bytes of one section of a little-endian ELF64 file."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise VelozError(f"{where}: not a little-endian ELF64 object")
    shoff, = struct.unpack_from("<Q", data, 0x28)  # fmt: skip
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_off, names_size = headers[shstrndx][4], headers[shstrndx][5]
    names = data[names_off : names_off + names_size]
    for name, _type, _flags, _addr, off, size in headers:
        if _string(names, name) == wanted:
            return data[off : off + size]
    raise VelozError(f"{where}: no {wanted} section (built without -g?)")


# ---- layouts: a struct's fields, packed and unpacked by name ------------------------


@dataclass(frozen=True)
class Field:
    name: str
    offset: int  # bytes
    size: int
    code: str  # struct code: B H I Q (b h i q signed), or "s" for bytes
    big_endian: bool = False  # an integer in network order (__be16...)

    @property
    def max(self) -> int:
        """The largest value the field holds (integers)."""
        return (1 << (8 * self.size - (1 if self.code.islower() else 0))) - 1


class Layout:
    """A C struct's bytes, from BTF: pack(**fields) and unpack(raw) by field name.

    Offsets, sizes and padding are the compiler's; Python only names the
    fields it sets. Fields named pad* default to zero. Integers in network
    order (__be16, __be32) are packed and unpacked as numbers, in that order.
    """

    def __init__(self, name: str, size: int, fields: list[Field]) -> None:
        self.name, self.size, self.fields = name, size, tuple(fields)
        self.names = tuple(f.name for f in fields)
        fmt, at = "<", 0
        for f in fields:
            fmt += "x" * (f.offset - at)
            fmt += f"{f.size}s" if f.code == "s" or f.big_endian else f.code
            at = f.offset + f.size
        self.struct = struct.Struct(fmt + "x" * (size - at))
        assert self.struct.size == size, (name, fmt, size)
        self.tuple = namedtuple(name, self.names)  # type: ignore[misc]
        self._be = [i for i, f in enumerate(fields) if f.big_endian]

    def field(self, name: str) -> Field:
        return self.fields[self.names.index(name)]

    def pack(self, *row: Any, **values: Any) -> bytes:
        """By name, or every field in declaration order (as struct.pack)."""
        if row:
            if values or len(row) != len(self.fields):
                raise TypeError(f"struct {self.name}: give all {len(self.fields)} fields, in order")
            values = dict(zip(self.names, row, strict=True))
        unknown = set(values) - set(self.names)
        if unknown:
            raise TypeError(f"struct {self.name} has no field {sorted(unknown)[0]}")
        missing = [n for n in self.names if n not in values and not n.startswith("pad")]
        if missing:
            raise TypeError(f"struct {self.name}: no value for {', '.join(missing)}")
        row = [values.get(f.name, b"" if f.code == "s" else 0) for f in self.fields]
        for i in self._be:
            row[i] = int(row[i]).to_bytes(self.fields[i].size, "big")
        return self.struct.pack(*row)

    def packer(self, *names: str) -> Callable[..., bytes]:
        """pack() taking the named fields positionally, in that order: the
        struct module's speed where a loop packs many (a route table)."""
        if set(names) != set(self.names) or len(names) != len(self.names):
            raise TypeError(f"struct {self.name} has the fields {', '.join(self.names)}")
        if names == self.names and not self._be:
            return self.struct.pack
        return lambda *row: self.pack(**dict(zip(names, row, strict=True)))

    def unpack(self, raw: bytes) -> Any:
        """The fields as a named tuple; raw may be longer (a per-CPU value's slot)."""
        return self.unpack_from(raw, 0)

    def unpack_from(self, raw: bytes, offset: int = 0) -> Any:
        row = list(self.struct.unpack_from(raw, offset))
        for i in self._be:
            row[i] = int.from_bytes(row[i], "big")
        return self.tuple(*row)


def _layout(btf: Btf, t: Type) -> Layout:
    if t.kind != STRUCT:
        raise VelozError(f"{btf.where}: {t.name or 'an anonymous type'} is not a struct")
    fields = []
    for name, type_id, bit_off, bits in t.info:
        if bits or bit_off % 8:
            raise VelozError(f"{btf.where}: struct {t.name}.{name} is a bitfield")
        fields.append(_field(btf, name, type_id, bit_off // 8))
    return Layout(t.name, t.size, fields)


def _field(btf: Btf, name: str, type_id: int, offset: int) -> Field:
    """An integer (struct code) or anything else (bytes) at offset."""
    t, big = btf[type_id], False
    while t.kind in _MODIFIERS:
        big = big or t.name in _BIG_ENDIAN
        t = btf[t.size]
    size = btf.sizeof(type_id)
    if t.kind in (INT, ENUM) and size in (1, 2, 4, 8):
        code = {1: "B", 2: "H", 4: "I", 8: "Q"}[size]
        signed = t.info[0] if t.kind == INT else False
        return Field(name, offset, size, code.lower() if signed else code, big)
    return Field(name, offset, size, "s")


def _scalar(btf: Btf, type_id: int, name: str) -> Layout:
    """A map key or value that is a bare integer (or array), as a one-field layout."""
    t = btf.resolve(type_id)
    if t.kind == STRUCT:
        return _layout(btf, t)
    return Layout(name, btf.sizeof(type_id), [_field(btf, "value", type_id, 0)])


# ---- an NF's maps and types ------------------------------------------------------


@dataclass(frozen=True)
class MapDef:
    """One map as the NF declares it (the BTF of its VZ_ARRAY... definition)."""

    name: str
    type: str  # MAP_TYPES' name
    key: Layout
    value: Layout
    max_entries: int

    @property
    def per_cpu(self) -> bool:
        return self.type.startswith("percpu")


class NfAbi:
    """What one built NF object's BTF says: maps, structs, enums."""

    def __init__(self, name: str, path: Path) -> None:
        self.name, self.path = name, path
        try:
            data = path.read_bytes()
        except OSError as e:
            raise VelozError(f"{path}: {e.strerror}", 1) from None
        self.btf = Btf(elf_section(data, ".BTF", str(path)), str(path))
        self.maps: dict[str, MapDef] = {}
        for vsi_type, _off, _size in self.btf.find(DATASEC, ".maps").info:
            var = self.btf[vsi_type]
            self.maps[var.name] = self._map(var.name, self.btf.resolve(var.size))

    def _map(self, name: str, t: Type) -> MapDef:
        fields: dict[str, int] = {}
        for m_name, m_type, _off, _bits in t.info:
            fields[m_name] = m_type
        pointee = {k: self.btf[self.btf[v].size] for k, v in fields.items()}

        def number(key: str) -> int:  # __uint(key, N): int (*key)[N]
            return pointee[key].info[2] if key in pointee else 0

        key = _scalar(self.btf, pointee["key"].id, f"{name}_key")
        value = _scalar(self.btf, pointee["value"].id, f"{name}_value")
        kind = number("type")
        return MapDef(name, MAP_TYPES.get(kind, str(kind)), key, value, number("max_entries"))

    @functools.cache  # noqa: B019 (one NfAbi per NF, kept for the process)
    def layout(self, struct_name: str) -> Layout:
        return _layout(self.btf, self.btf.find(STRUCT, struct_name))

    def enum(self, enum_name: str) -> dict[str, int]:
        """NAME -> value, in declaration order."""
        return dict(self.btf.find(ENUM, enum_name).info)

    def enum_names(self, enum_name: str, prefix: str, drop: tuple[str, ...] = ()) -> list[str]:
        """The lower-case names of an enum of indexes 0..n-1, prefix off, in value
        order; names in drop (a COUNT sentinel) are left out."""
        values = {k: v for k, v in self.enum(enum_name).items() if k not in drop}
        names = sorted(values, key=values.__getitem__)
        if [values[n] for n in names] != list(range(len(names))):
            raise VelozError(f"{self.path}: enum {enum_name} is not the indexes 0..n-1")
        return [n.removeprefix(prefix).lower() for n in names]

    def named(self, enum_name: str, prefix: str) -> dict[str, int]:
        """lower-case name (prefix off) -> value."""
        return {k.removeprefix(prefix).lower(): v for k, v in self.enum(enum_name).items()}

    def map(self, name: str) -> MapDef:
        if name not in self.maps:
            raise VelozError(f"{self.path}: no map {name}")
        return self.maps[name]


@functools.cache
def nf_abi(name: str) -> NfAbi:
    return NfAbi(name, paths.nf(name).bpf)


# ---- #define numbers of include/veloz/abi.h ---------------------------------------

_DEFINE = re.compile(r"^#define\s+(VZ_\w+)\s+(.+?)\s*(?:/\*.*)?$", re.M)
_LITERAL = re.compile(r"^\(?\s*(0x[0-9a-fA-F]+|\d+)u?\s*(?:<<\s*(\d+)\s*)?\)?$")


@functools.cache
def defines() -> dict[str, int]:
    """abi.h's `#define VZ_NAME <number>` (hex, decimal, or (1u << n)): the
    constants that have no type for BTF to carry. Others are left out."""
    text = (paths.include_dir() / "veloz" / "abi.h").read_text()
    out = {}
    for name, body in _DEFINE.findall(text):
        m = _LITERAL.match(body)
        if m:
            out[name] = int(m[1], 0) << int(m[2] or 0)
    return out


def define(name: str) -> int:
    values = defines()
    if name not in values:
        raise VelozError(f"include/veloz/abi.h defines no number {name}")
    return values[name]


def max_port() -> int:
    """The highest port number a run can have (VZ_MAX_PORTS - 1)."""
    return define("VZ_MAX_PORTS") - 1


# ---- lazy views: a module's ABI names, read on first use ------------------------


class Lazy:
    """A value computed from an NF's ABI on first access, then kept."""

    def __init__(self, get: Callable[[NfAbi], Any]) -> None:
        self.get = get

    def __set_name__(self, owner: type, name: str) -> None:
        self.attr = name

    def __get__(self, view: Any, owner: type | None = None) -> Any:
        if view is None:
            return self
        value = self.get(nf_abi(view.nf))
        view.__dict__[self.attr] = value  # later reads skip the descriptor
        return value


class View:
    """Base of a module's ABI names: class attributes that are Lazy(...).

    A module keeps `import veloz` cheap (every `veloz` command builds the
    `ctl` parser, which imports it) and reads the object only when a name
    is used; module_getattr() lets tests and callers read them as module
    attributes (lb.RING_SIZE).
    """

    nf = ""

    def module_getattr(self, module: str) -> Callable[[str], Any]:
        def getattr_(name: str) -> Any:
            if isinstance(getattr(type(self), name, None), Lazy):
                return getattr(self, name)
            raise AttributeError(f"module {module!r} has no attribute {name!r}")

        return getattr_


def layout(struct_name: str) -> Lazy:
    return Lazy(lambda a: a.layout(struct_name))


def max_entries(map_name: str) -> Lazy:
    return Lazy(lambda a: a.map(map_name).max_entries)


def map_value(map_name: str) -> Lazy:
    return Lazy(lambda a: a.map(map_name).value)
