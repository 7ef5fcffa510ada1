"""The generator ceiling's variants (veloz.lab.gen_ceiling) and where the
lab sends static frames, checked without root and without sending anything
(vz-gen's own options: test_gen_batch.py)."""

from __future__ import annotations

import pytest

from veloz.core.errors import VelozError
from veloz.lab import gen_ceiling, trial


def test_ceiling_variants_parse_to_vz_gen_options():
    v = gen_ceiling.parse_variant("threads=2,rxq=2")
    assert v == {"threads": 2, "rxq": 2} and gen_ceiling.name(v) == "threads=2,rxq=2"
    assert gen_ceiling.gen_extra(v) == ["--threads", "2"]  # rxq is the DUT's, not vz-gen's
    assert gen_ceiling.parse_variant("base") == {} and gen_ceiling.name({}) == "base"
    assert gen_ceiling.gen_extra(gen_ceiling.parse_variant("afxdp")) == ["--afxdp"]
    assert gen_ceiling.gen_extra({"batch": 256}) == ["--batch", "256"]
    v = gen_ceiling.parse_variant("threads=2,rxq=2,static")
    assert gen_ceiling.gen_extra(v) == ["--static", "--threads", "2"]
    assert gen_ceiling.gen_extra(gen_ceiling.parse_variant("batch-stamp")) == ["--batch-stamp"]


@pytest.mark.parametrize(
    ("text", "message"),
    [("threads=x", "is not batch="), ("cores=2", "is not batch="),
     ("threads=65", "threads must be between 1 and 64"), ("rxq=0", "rxq must be between"),
     ("afxdp,threads=2", "not afxdp"), ("afxdp,static", "not afxdp")],
)  # fmt: skip
def test_bad_ceiling_variants_are_refused(text, message):
    with pytest.raises(VelozError, match=message):
        gen_ceiling.parse_variant(text)


def test_ceiling_ratios_are_per_backend_against_its_first_variant():
    recs = [{"backend": b, "variant": v, "rate_pps": r}
            for b, v, r in (("generator", "base", 10.0), ("generator", "threads=2", 20.0),
                            ("xdp", "base", 5.0), ("xdp", "threads=2", 5.0))] * 3  # fmt: skip
    rows = {(r["backend"], r["variant"]): r for r in gen_ceiling.summarize(recs)}
    assert rows["generator", "threads=2"]["vs_base"]["ratio"] == pytest.approx(2.0)
    assert rows["xdp", "threads=2"]["vs_base"]["ratio"] == pytest.approx(1.0)
    assert rows["xdp", "base"]["trials"] == 3


def test_the_lab_sends_static_frames_where_nothing_reads_them():
    assert "--static" in trial.gen_argv("drop", 64, 0, 1.0, None, 1)
    # a sink reads tx's frames (order, latency); flows vary the port; a
    # caller's own options are its choice
    assert "--static" not in trial.gen_argv("tx", 64, 0, 1.0, None, 1)
    assert "--static" not in trial.gen_argv("drop", 64, 0, 1.0, None, 4)
    assert "--static" not in trial.gen_argv("drop", 64, 0, 1.0, None, 1, extra=[])
