"""PulseView session setups (.pvs): GVariant and QSettings encodings, round trips,
and `spigap decoders pvs` on real files. (That PulseView itself reads them back
the same way is checked in test_pulseview.py.)"""

from __future__ import annotations

import decimal
import math
import shutil
import struct

import pytest

from spigap.cli import main
from spigap.sigrok import pvs
from conftest import CAPTURES, run_sigrok

B10 = CAPTURES / "mcp3008-rpi3-k4.4-b10.sr"


# ------------------------------------------------------------------ GVariant

def test_gvariant_encodings_are_glib_serialized_data():
    # 's': UTF-8 + NUL; 'x': int64 little-endian; 'd': IEEE double little-endian
    assert pvs.gvariant_serialize("active-low") == b"active-low\0"
    assert pvs.gvariant_serialize(10) == b"\x0a" + b"\0" * 7
    assert pvs.gvariant_serialize(-2) == b"\xfe" + b"\xff" * 7
    assert pvs.gvariant_serialize(0.97) == struct.pack("<d", 0.97)
    assert pvs.gvariant_type("x") == "s" and pvs.gvariant_type(3) == "x" and pvs.gvariant_type(3.0) == "d"
    with pytest.raises(TypeError):
        pvs.gvariant_type(True)        # libsigrokdecode options have no booleans
    for t, v in (("s", "µs ok"), ("x", 2**40), ("d", -1.5e-9)):
        assert pvs.gvariant_deserialize(t, pvs.gvariant_serialize(v, t)) == v
    with pytest.raises(ValueError):
        pvs.gvariant_deserialize("x", b"\0" * 4)
    with pytest.raises(ValueError):
        pvs.gvariant_deserialize("s", b"abc")


# ------------------------------------------------------------------ QSettings text

@pytest.mark.parametrize("data, text", [
    # Qt escapes NUL as \0 and a hex digit right after an escape as \xNN,
    # so that the reader does not run the digits together
    (b"\n\0\0\0\0\0\0\0", r"@ByteArray(\n\0\0\0\0\0\0\0)"),
    (b"\x01\x00\x00\x00\x00\x00\x00\x00", r"@ByteArray(\x1\0\0\0\0\0\0\0)"),
    (b"\x001", r"@ByteArray(\0\x31)"),
    (b"\xffa", r"@ByteArray(\xff\x61)"),
    (b"active-low\0", r"@ByteArray(active-low\0)"),
    # '=' ',' ';' make Qt quote the whole value (this one is a double PulseView
    # 0.4.2 wrote back, byte for byte, after loading our .pvs)
    (bytes.fromhex("0bd7a3703d0aef3f"), r'"@ByteArray(\v\xd7\xa3p=\n\xef?)"'),
])
def test_bytearray_values_are_escaped_like_qsettings(data, text):
    assert pvs.ini_value(data) == text
    assert pvs.ini_to_python(text) == data


def test_string_values_and_keys():
    assert pvs.ini_value("SPI gaps") == "SPI gaps"
    assert pvs.ini_value("a,b") == '"a,b"'
    assert pvs.ini_to_python('"a,b"') == "a,b"
    assert pvs.ini_value("@odd") == "@@odd"
    assert pvs.ini_to_python("@@odd") == "@odd"
    assert pvs.ini_value(" lead") == '" lead"'
    assert pvs.ini_value(True) == "true"
    assert pvs.ini_key("decoder0/option1/value") == r"decoder0\option1\value"
    assert pvs.ini_key("CS#") == "CS%23"


def test_boost_timestamps():
    # PulseView 0.4.2 wrote this for a zero offset (checked on the real binary)
    assert pvs.boost_timestamp(0) == "22 serialization::archive 18 0 0 0 0 0 0 0 0 0 0 0 0 0 6"
    assert pvs.boost_timestamp(2e-5) == "22 serialization::archive 18 0 0 0 0 2000 0 0 0 0 0 -8 0 0 6"
    assert pvs.boost_timestamp("1.2345e-5").split()[7:9] == ["1234", "50000000"]
    for v in ("0", "1.5", "-3.25e-9", "123456789.123", "0.000180"):
        assert pvs.parse_boost_timestamp(pvs.boost_timestamp(v)) == decimal.Decimal(v)


# ------------------------------------------------------------------ round trip

def _setup():
    return pvs.Setup([
        pvs.DecodeSignal("SPI gaps", [pvs.StackedDecoder("spi_gaps", {
            "transfers_per_message": ("x", 10), "inter_transfer_gap": ("d", 0.97),
            "cs_polarity": ("s", "active-high")})],
            [pvs.DecodeChannel("CLK", "SCLK"), pvs.DecodeChannel("CS#", "CE0"),
             pvs.DecodeChannel("MOSI"), pvs.DecodeChannel("MISO")]),
        pvs.DecodeSignal("MCP3008", [pvs.StackedDecoder("spi"), pvs.StackedDecoder("mcp3008", {"vref": ("d", 3.3)})],
                         [pvs.DecodeChannel("CLK", "SCLK"), pvs.DecodeChannel("MISO", "MISO"),
                          pvs.DecodeChannel("MOSI", "MOSI"), pvs.DecodeChannel("CS#", "CE0")], color=0xFF112233),
    ], view_scale=2e-8, view_offset=1.8e-4)


def test_render_then_read_gives_the_same_setup():
    s = _setup()
    text = pvs.render(s)
    back = pvs.read(text)
    assert back.decode_signals[0].decoders == s.decode_signals[0].decoders
    assert back.decode_signals[1].decoders == s.decode_signals[1].decoders
    assert [c.assigned for c in back.decode_signals[0].channels] == ["SCLK", "CE0", None, None]
    assert back.decode_signals[1].color == 0xFF112233
    assert back.view_scale == 2e-8 and back.view_offset == pytest.approx(1.8e-4, abs=1e-18)


def test_rendered_keys_are_what_pulseview_reads():
    ini = pvs.parse_ini(pvs.render(_setup()))
    g = ini["General"]
    assert (g["decode_signals"], g["views"], g["meta_objs"]) == ("2", "1", "0")
    d0 = ini["decode_signal0"]
    assert d0["decoders"] == "1" and d0["decoder0\\id"] == "spi_gaps"
    assert d0["decoder0\\options"] == "3"
    opts = {d0[f"decoder0\\option{k}\\name"]: (d0[f"decoder0\\option{k}\\type"], d0[f"decoder0\\option{k}\\value"])
            for k in range(3)}
    assert opts["transfers_per_message"] == ("x", r"@ByteArray(\n\0\0\0\0\0\0\0)")
    assert opts["cs_polarity"] == ("s", r"@ByteArray(active-high\0)")
    assert opts["inter_transfer_gap"][0] == "d"
    assert d0["channels"] == "4"
    assert d0["channel0\\assigned_signal_name"] == "SCLK" and d0["channel1\\name"] == "CS#"
    assert "channel2\\assigned_signal_name" not in d0
    assert d0["channel2\\initial_pin_state"] == "2"
    d1 = ini["decode_signal1"]
    assert (d1["decoders"], d1["decoder0\\id"], d1["decoder1\\id"]) == ("2", "spi", "mcp3008")
    assert d1["decoder0\\options"] == "0"
    assert ini["view0"]["scale"] == "2e-08"
    assert ini["view0"]["offset"].startswith("22 serialization::archive 18 ")


def test_zoom_to_fit_without_a_scale():
    s = _setup()
    s.view_scale = s.view_offset = None
    text = pvs.render(s)
    assert "[view0]" not in text and "views=0" in text
    s.view_offset = 1e-3
    with pytest.raises(ValueError):
        pvs.render(s)


def test_read_rejects_broken_files():
    text = pvs.render(_setup())
    with pytest.raises(ValueError):
        pvs.read(text.replace("decode_signals=2", "decode_signals=3"))
    with pytest.raises(ValueError):
        pvs.read(text.replace(r"@ByteArray(\n\0\0\0\0\0\0\0)", "10"))


# ------------------------------------------------------------------ spigap decoders pvs

def _cli(*args) -> int:
    return main(["decoders", "pvs", *[str(a) for a in args]])


def test_pvs_command_gaps_carries_the_analysis(tmp_path, capsys):
    from spigap.api import SpiConfig, analyze_device

    cap = tmp_path / "b10.sr"
    shutil.copy(B10, cap)
    assert _cli(cap, "--gaps", "--stack", "spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CE0:wordsize=8,mcp3008:vref=5.0:part=MCP3008",
                "--scale", "20ns", "--start", "180us") == 0
    assert "10 transfers per message" in capsys.readouterr().out
    setup = pvs.read((tmp_path / "b10.pvs").read_text())
    gaps, mcp = setup.decode_signals
    a = analyze_device(B10, SpiConfig())
    # one population of word gaps: the threshold sits above the longest one
    assert a.inter_transfer_threshold is None
    thr = float(a.pair_gap.max())
    assert gaps.decoders[0].id == "spi_gaps"
    o = gaps.decoders[0].options
    assert o["transfers_per_message"] == ("x", 10)
    assert "first_message_start" not in o          # the analysis says messages start at transfer 0
    assert o["inter_transfer_gap"][0] == "d"
    # half a sample above the floor of that threshold, in µs
    assert o["inter_transfer_gap"][1] * 1e-6 / a.tick_s == pytest.approx(math.floor(thr) + 0.5)
    # Other CS# (a shared bus's other device) is left unassigned for one device
    assert [(c.name, c.assigned) for c in gaps.channels] == [("CLK", "SCLK"), ("CS#", "CE0"),
                                                              ("MOSI", "MOSI"), ("MISO", "MISO"),
                                                              ("Other CS# 1", None), ("Other CS# 2", None),
                                                              ("Other CS# 3", None)]
    assert [d.id for d in mcp.decoders] == ["spi", "mcp3008"]
    assert mcp.name == "MCP3008"
    assert mcp.decoders[0].options == {}             # wordsize=8 is spi's default: not stored
    assert mcp.decoders[1].options == {"vref": ("d", 5.0)}   # part=MCP3008 is the default
    assert [(c.name, c.assigned) for c in mcp.channels] == [("CLK", "SCLK"), ("MISO", "MISO"),
                                                             ("MOSI", "MOSI"), ("CS#", "CE0")]
    assert setup.view_scale == 2e-8 and setup.view_offset == pytest.approx(180e-6)


def test_pvs_options_make_the_decoder_match_the_analyzer(tmp_path):
    """The spi_gaps options a .pvs carries (run here through sigrok-cli) give
    the analyzer's inter-byte/inter-transfer and cs_change/context-switch labels."""
    from spigap.api import SpiConfig, analyze_device

    cap = CAPTURES / "mcp3008-rpi3-mcp320x-iio.sr"
    out = tmp_path / "x.pvs"
    assert _cli(cap, "--gaps", "--transfers-per-message", "1", "-o", out) == 0
    dec = pvs.read(out.read_text()).decode_signals[0]
    opts = ":".join(f"{k}={v}" for k, (t, v) in dec.decoders[0].options.items())
    chans = ":".join(f"{k}={c.assigned}" for k, c in zip(("clk", "cs"), dec.channels))
    text = run_sigrok(["-i", str(cap), "-P", f"spi_gaps:{chans}:{opts}", "-A",
                       "spi_gaps=inter-byte:inter-transfer:context-switch:cs-change",
                       "--protocol-decoder-samplenum"])
    kinds = [line.split(": ", 1)[1].split(":")[0] for line in text.splitlines()]
    a = analyze_device(cap, SpiConfig(transfers_per_message=1))
    n_it = int(a.pair_inter_transfer.sum())
    assert n_it > 0
    assert kinds.count("Inter-transfer gap") == n_it
    assert kinds.count("Inter-byte gap") == len(a.pair_gap) - n_it
    assert kinds.count("Context switch") == a.n - 1


@pytest.mark.parametrize("args, message", [
    (["--stack", "spi:clk=SCLK:cs=CS0"], "no channel 'CS0'"),
    (["--stack", "mcp3008"], "stacks on 'spi'"),
    (["--stack", "spi:cs=CE0:wordsize=x"], "takes an integer"),
    (["--stack", "spi:cs=CE0:cpol=3"], "must be one of 0, 1"),
    (["--stack", "spi:cs=CE0:foo=1"], "has no channel or option 'foo'"),
    (["--stack", "spi:cs=CE0,spi_gaps"], "give it its own --stack"),
    (["--stack", "no_such_decoder"], "no sigrok decoder 'no_such_decoder'"),
    (["--stack", "spi_gaps:clk=SCLK"], "needs channel cs"),
    ([], "nothing to set up"),
    (["--gaps", "--start", "1us"], "--start needs --scale"),
    (["--gaps", "--samplerate", "1MHz"], "does not apply"),
])
def test_pvs_command_bad_input_is_one_line(tmp_path, capsys, args, message):
    cap = tmp_path / "b10.sr"
    shutil.copy(B10, cap)
    assert _cli(cap, *args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "b10.pvs").exists()


def test_pvs_command_hides_decoder_rows(tmp_path, capsys):
    cap = tmp_path / "b10.sr"
    shutil.copy(B10, cap)
    assert _cli(cap, "--stack", "spi:clk=SCLK:mosi=MOSI:cs=CE0,mcp3008", "--hide", "spi") == 0
    text = (tmp_path / "b10.pvs").read_text()
    assert "decoder0\\visible=false" in text and "decoder1\\visible=true" in text
    assert [d.visible for d in pvs.read(text).decode_signals[0].decoders] == [False, True]
    assert _cli(cap, "--stack", "spi:clk=SCLK:mosi=MOSI:cs=CE0", "--hide", "mcp3008", "--force") == 2
    assert "not in any stack" in capsys.readouterr().err


def test_pvs_command_does_not_overwrite_without_force(tmp_path, capsys):
    cap = tmp_path / "b10.sr"
    shutil.copy(B10, cap)
    (tmp_path / "b10.pvs").write_text("mine")
    assert _cli(cap, "--stack", "spi:clk=SCLK:cs=CE0") == 2
    assert (tmp_path / "b10.pvs").read_text() == "mine"
    assert _cli(cap, "--stack", "spi:clk=SCLK:cs=CE0", "--force") == 0
    assert pvs.read((tmp_path / "b10.pvs").read_text()).decode_signals[0].decoders[0].id == "spi"


def test_auto_assign_follows_pulseview():
    from spigap.cli.decoders import auto_assign

    chans = ["SCLK", "MOSI", "MISO", "CE0", "CS"]
    assert auto_assign("CLK", chans) == "SCLK"
    assert auto_assign("CS#", chans) == "CS"
    assert auto_assign("MISO", chans) == "MISO"
    assert auto_assign("DOUTB", chans) is None
