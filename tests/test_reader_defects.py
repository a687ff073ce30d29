"""Regression tests for reader defects found in damaged and unusual inputs (issue 9).

Each test builds the smallest file that showed the defect and checks the
outcome is a one-line ``SpigapError`` (or a correct stream), within a time
bound (the fuzz harness's ``exercise``: a hang fails the test, it does not
hang the suite).
"""

from __future__ import annotations

import io
import struct
import zipfile

import numpy as np
import pytest

from spigap.errors import InputError
from spigap.io import open_capture
from test_fuzz_readers import exercise

METADATA = ("[global]\nsigrok version=0.5.2\n\n[device 1]\ncapturefile=logic-1\ntotal probes=3\n"
            "samplerate=1 MHz\ntotal analog=0\nprobe1=CLK\nprobe2=CS\nprobe3=MOSI\nunitsize=1\n")


def _samples(n: int = 4096) -> bytes:
    i = np.arange(n)
    clk = (i // 3) % 2
    cs = (i > 100) & (i < n - 100)
    mosi = (i // 17) % 2
    return ((clk | (cs.astype(int) << 1) | (mosi << 2)).astype(np.uint8)).tobytes()


def sr_bytes(members: dict[str, bytes], stored: tuple[str, ...] = ()) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data, compress_type=zipfile.ZIP_STORED if name in stored else zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def _central_entry(data: bytes, name: str) -> int:
    """Offset of the central directory entry of ``name``."""
    pos = data.find(b"PK\x01\x02")
    while pos >= 0:
        nlen = struct.unpack_from("<H", data, pos + 28)[0]
        if data[pos + 46:pos + 46 + nlen] == name.encode():
            return pos
        pos = data.find(b"PK\x01\x02", pos + 4)
    raise KeyError(name)


def _local_entry(data: bytes, name: str) -> int:
    return struct.unpack_from("<I", data, _central_entry(data, name) + 42)[0]


def _valid(tmp_path):
    return sr_bytes({"version": b"2", "metadata": METADATA.encode(), "logic-1-1": _samples()})


def test_valid_seed_reads(tmp_path):
    p = tmp_path / "ok.sr"
    p.write_bytes(_valid(tmp_path))
    assert exercise(p, None) == "ok"


def test_sr_member_data_past_end_of_file_is_truncation_not_a_hang(tmp_path):
    """The 7 KB .sr that hung ``spigap analyze``: a member whose directory size is
    0 (so it is streamed) and whose local header puts its data past the end of the
    file. ``os.pread`` returns b"" there; the reader must stop, not loop."""
    data = bytearray(_valid(tmp_path))
    c = _central_entry(data, "logic-1-1")
    struct.pack_into("<I", data, c + 24, 0)                   # uncompressed size 0: streaming path
    loc = _local_entry(data, "logic-1-1")
    struct.pack_into("<H", data, loc + 28, 0xFFFF)            # extra field: data starts past the end
    p = tmp_path / "past_end.sr"
    p.write_bytes(bytes(data))
    assert exercise(p, None) in ("CaptureTruncated", "InputError")


def test_sr_member_size_beyond_file_is_bounded(tmp_path):
    """A directory that claims a 4 GB compressed member: no 4 GB read, a truncation."""
    data = bytearray(_valid(tmp_path))
    c = _central_entry(data, "logic-1-1")
    struct.pack_into("<I", data, c + 20, 0xFFFFFFF0)          # compressed size
    p = tmp_path / "huge_csize.sr"
    p.write_bytes(bytes(data))
    assert exercise(p, None) in ("CaptureTruncated", "InputError")


def test_sr_metadata_crc_is_checked(tmp_path):
    """A byte flipped in a stored ``metadata`` member (directory CRC intact)."""
    data = bytearray(sr_bytes({"version": b"2", "metadata": METADATA.encode(), "logic-1-1": _samples()},
                              stored=("metadata", "version")))
    loc = _local_entry(data, "metadata")
    nlen, xlen = struct.unpack_from("<HH", data, loc + 26)
    start = loc + 30 + nlen + xlen
    k = data.index(b"samplerate=1 MHz", start) + len("samplerate=")
    data[k] = ord("9")                                        # 9 MHz: plausible, wrong, caught by the CRC
    p = tmp_path / "crc.sr"
    p.write_bytes(bytes(data))
    with pytest.raises(InputError, match="'metadata' is damaged"):
        open_capture(p)


def test_sr_version_crc_is_checked(tmp_path):
    data = bytearray(sr_bytes({"version": b"2", "metadata": METADATA.encode(), "logic-1-1": _samples()},
                              stored=("metadata", "version")))
    loc = _local_entry(data, "version")
    nlen, xlen = struct.unpack_from("<HH", data, loc + 26)
    data[loc + 30 + nlen + xlen] = ord("1")                   # "2" -> "1": another valid version
    p = tmp_path / "vcrc.sr"
    p.write_bytes(bytes(data))
    with pytest.raises(InputError, match="'version' is damaged"):
        open_capture(p)


def test_sr_metadata_bomb_is_refused_with_a_clear_error(tmp_path):
    """A ``metadata`` member inflating to 64 MiB (the reported one: 2 GB ->
    MemoryError, exit 3) is refused before it is inflated beyond the limit."""
    md = METADATA.encode() + b"#" * (64 << 20)
    p = tmp_path / "bomb.sr"
    p.write_bytes(sr_bytes({"version": b"2", "metadata": md, "logic-1-1": _samples()}))
    with pytest.raises(InputError, match="over the 1 MiB"):
        open_capture(p)
    # the directory lies (claims a small size): inflating stops at the limit all the same
    data = bytearray(p.read_bytes())
    struct.pack_into("<I", data, _central_entry(data, "metadata") + 24, 200)
    p.write_bytes(bytes(data))
    with pytest.raises(InputError, match="inflates to more than 1 MiB"):
        open_capture(p)


def test_sr_lying_logic_size_cannot_inflate_past_it(tmp_path):
    """A logic member whose directory size is smaller than its data: damaged, bounded."""
    data = bytearray(_valid(tmp_path))
    struct.pack_into("<I", data, _central_entry(data, "logic-1-1") + 24, 100)
    p = tmp_path / "lie.sr"
    p.write_bytes(bytes(data))
    assert exercise(p, None) == "CaptureTruncated"


@pytest.mark.parametrize("line", ["capturefile=\n", "capturefile=   \n"])
def test_sr_empty_capturefile(tmp_path, line):
    """``capturefile=`` with no value gave an edge stream without its tick-0 entry."""
    md = METADATA.replace("capturefile=logic-1\n", line)
    p = tmp_path / "empty_cf.sr"
    p.write_bytes(sr_bytes({"version": b"2", "metadata": md.encode(), "logic-1-1": _samples()}))
    with pytest.raises(InputError, match="capturefile"):
        open_capture(p)


def test_sr_capturefile_naming_a_missing_member(tmp_path):
    md = METADATA.replace("capturefile=logic-1", "capturefile=nothere")
    p = tmp_path / "missing.sr"
    p.write_bytes(sr_bytes({"version": b"2", "metadata": md.encode(), "logic-1-1": _samples()}))
    with pytest.raises(InputError, match="'nothere'"):
        open_capture(p)


def test_sr_empty_logic_member(tmp_path):
    p = tmp_path / "empty.sr"
    p.write_bytes(sr_bytes({"version": b"2", "metadata": METADATA.encode(), "logic-1-1": b""}))
    assert exercise(p, None) == "InputError"


# ----------------------------------------------------------------------- VCD
def test_vcd_identifiers_sharing_a_long_prefix_stay_apart(tmp_path):
    """Two identifiers equal in their first 32 bytes and in length were merged into
    one channel (the tokenizer matched them by a hash of 32 bytes + length)."""
    a, b = "A" * 40 + "x", "A" * 40 + "y"
    text = (f"$timescale 1ns $end\n$var wire 1 {a} clk $end\n$var wire 1 {b} cs $end\n"
            f"$enddefinitions $end\n#0\n0{a}\n1{b}\n#10\n1{a}\n#20\n0{a}\n#30\n0{b}\n#40\n1{a}\n")
    p = tmp_path / "prefix.vcd"
    p.write_text(text)
    with open_capture(p) as r:
        blocks = list(r.edges(["clk", "cs"]))
    t = np.concatenate([x.ticks for x in blocks])
    s = np.concatenate([x.states for x in blocks])
    assert t.tolist() == [0, 10, 20, 30, 40]
    assert s.tolist() == [0b10, 0b11, 0b10, 0b00, 0b01]


def test_vcd_vector_identifiers_sharing_a_prefix(tmp_path):
    a, b = "#" + "q" * 33, "#" + "q" * 32 + "r"
    text = (f"$timescale 1ns $end\n$var wire 2 {a} d [1:0] $end\n$var wire 1 {b} e $end\n"
            f"$enddefinitions $end\n#0\nb10 {a}\n0{b}\n#5\nb01 {a}\n1{b}\n")
    p = tmp_path / "vec.vcd"
    p.write_text(text)
    with open_capture(p) as r:
        blocks = list(r.edges(["d[1]", "d[0]", "e"]))
    s = np.concatenate([x.states for x in blocks])
    assert s.tolist() == [0b001, 0b110]


def test_vcd_header_limit_is_a_clear_error(tmp_path, monkeypatch):
    import spigap.io.vcd as vcd

    monkeypatch.setattr(vcd, "HEADER_LIMIT", 1 << 16)
    p = tmp_path / "big.vcd"
    p.write_text("$timescale 1ns $end\n" + "$comment " + "x " * 100000 + "$end\n")
    with pytest.raises(InputError, match="enddefinitions"):
        open_capture(p)

