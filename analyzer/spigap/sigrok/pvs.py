"""PulseView 0.4.x session setups (.pvs): write them, and read them back.

A .pvs is a QSettings INI file (PulseView ``Session::save_setup``). PulseView
opens ``<name>.pvs`` by itself when it opens ``<name>.sr``, and
``pulseview -s setup.pvs capture.sr`` names one explicitly. What we write,
per decode signal (``DecodeSignal::save_settings`` /
``restore_settings`` in PulseView 0.4.2)::

    [General]
    decode_signals=1
    views=0
    meta_objs=0

    [decode_signal0]
    name=SPI gaps
    enabled=true
    color=4288269567
    conversion_type=0
    conv_options=0
    decoders=1                         ; stack depth, bottom decoder first
    decoder0\\id=spi_gaps
    decoder0\\visible=true
    decoder0\\options=1                ; options that differ from the default
    decoder0\\option0\\name=transfers_per_message
    decoder0\\option0\\type=x          ; GVariant type: s, x (int64) or d (double)
    decoder0\\option0\\value=@ByteArray(\\n\\0\\0\\0\\0\\0\\0\\0)   ; serialized GVariant
    channels=4                         ; every channel of the stack, in decoder order
    channel0\\name=CLK
    channel0\\initial_pin_state=2      ; SRD_INITIAL_PIN_SAME_AS_SAMPLE0
    channel0\\assigned_signal_name=SCLK

The serialized GVariant of a string is its UTF-8 bytes plus a NUL; of an
int64 or a double, 8 little-endian bytes. PulseView hands the value to
libsigrokdecode, which rejects a value whose type differs from the option's
default, so the type comes from the decoder's own declaration
(``spigap.sigrok.pdinfo``).

With ``view_scale`` (seconds per pixel) a ``[view0]`` group sets the zoom
instead of zooming to fit, and ``view_offset`` the time at the left edge
(a boost text archive of PulseView's decimal Timestamp, see
``boost_timestamp``).

An unknown decoder id is skipped by PulseView without a message, so the
decoders must be installed (``spigap decoders install``) or in
``SIGROKDECODE_DIR``.
"""

from __future__ import annotations

import dataclasses
import decimal
import re
import struct

# SRD_INITIAL_PIN_SAME_AS_SAMPLE0: the initial pin state PulseView uses by default
PIN_SAME_AS_SAMPLE0 = 2

# ARGB colours for successive decode signals (PulseView writes QColor::rgba())
COLORS = (0xFF4E9A06, 0xFF3465A4, 0xFFCE5C00, 0xFF75507B, 0xFFC4A000, 0xFFCC0000)


# ---------------------------------------------------------------- GVariant

def gvariant_type(value) -> str:
    """The GVariant type string libsigrokdecode uses for an option value."""
    if isinstance(value, bool):
        raise TypeError("decoder options are str, int or float, not bool")
    if isinstance(value, int):
        return "x"
    if isinstance(value, float):
        return "d"
    if isinstance(value, str):
        return "s"
    raise TypeError(f"no GVariant type for {type(value).__name__}")


def gvariant_serialize(value, type_str: str | None = None) -> bytes:
    """The serialized GVariant data (g_variant_get_data) of a str/int/float."""
    t = type_str or gvariant_type(value)
    if t == "s":
        b = value.encode("utf-8")
        if b"\0" in b:
            raise ValueError("a GVariant string cannot hold a NUL character")
        return b + b"\0"
    if t == "x":
        return struct.pack("<q", int(value))
    if t == "d":
        return struct.pack("<d", float(value))
    raise ValueError(f"unsupported GVariant type {t!r}")


def gvariant_deserialize(type_str: str, data: bytes):
    if type_str == "s":
        if not data.endswith(b"\0"):
            raise ValueError("GVariant string data must end with a NUL byte")
        return data[:-1].decode("utf-8")
    if type_str == "x":
        if len(data) != 8:
            raise ValueError(f"GVariant int64 data must be 8 bytes, not {len(data)}")
        return struct.unpack("<q", data)[0]
    if type_str == "d":
        if len(data) != 8:
            raise ValueError(f"GVariant double data must be 8 bytes, not {len(data)}")
        return struct.unpack("<d", data)[0]
    raise ValueError(f"unsupported GVariant type {type_str!r}")


# ---------------------------------------------------------------- view timestamps

# PulseView's Timestamp is boost::multiprecision::number<cpp_dec_float<24>>,
# stored in a .pvs as a boost text archive (GlobalSettings::store_timestamp).
# cpp_dec_float<24> keeps 6 limbs of 8 decimal digits; the value is
# sum(limb[i] * 10^(exp - 8 i)) with exp a multiple of 8.
_BOOST_ARCHIVE_HEADER = "22 serialization::archive 18 0 0 0 0"
_LIMBS = 6


def boost_timestamp(seconds) -> str:
    """A time in seconds as PulseView 0.4.2 (boost 1.74) writes a Timestamp.
    Floats are rounded to the femtosecond (185.5e-6 is 0.0001855, not
    0.00018549999999999998); strings and Decimals are taken as they are."""
    if isinstance(seconds, float):
        seconds = repr(round(seconds, 15))
    d = decimal.Decimal(str(seconds))
    if not d.is_finite():
        raise ValueError(f"not a finite time: {seconds!r}")
    neg = d < 0
    d = abs(d)
    limbs = [0] * _LIMBS
    exp = 0
    if d != 0:
        exp = 8 * ((d.adjusted()) // 8)
        scaled = d.scaleb(-exp)                       # 1 <= scaled < 1e8
        for i in range(_LIMBS):
            whole = int(scaled)
            limbs[i] = whole
            scaled = (scaled - whole).scaleb(8)
    fields = limbs + [exp, int(neg), 0, _LIMBS]       # fpclass 0 = finite
    return _BOOST_ARCHIVE_HEADER + " " + " ".join(str(f) for f in fields)


def parse_boost_timestamp(text: str) -> decimal.Decimal:
    t = text.split()
    head = _BOOST_ARCHIVE_HEADER.split()
    if t[:2] != head[:2] or len(t) != len(head) + _LIMBS + 4:
        raise ValueError(f"not a PulseView timestamp archive: {text!r}")
    f = [int(x) for x in t[len(head):]]
    limbs, exp, neg = f[:_LIMBS], f[_LIMBS], f[_LIMBS + 1]
    v = sum((decimal.Decimal(limb).scaleb(exp - 8 * i) for i, limb in enumerate(limbs)), decimal.Decimal(0))
    return -v if neg else v


# ---------------------------------------------------------------- QSettings INI text

_KEY_OK = re.compile(r"[A-Za-z0-9_.\-]")
_HEX = set("0123456789abcdefABCDEF")
_SIMPLE_ESC = {"\a": "a", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t", "\v": "v",
               '"': '"', "\\": "\\"}


def ini_key(key: str) -> str:
    """QSettingsPrivate::iniEscapedKey: '/' becomes '\\', other odd characters %XX."""
    out = []
    for ch in key:
        if ch == "/":
            out.append("\\")
        elif _KEY_OK.match(ch):
            out.append(ch)
        elif ord(ch) <= 0xFF:
            out.append("%%%02X" % ord(ch))
        else:
            out.append("%%U%04X" % ord(ch))
    return "".join(out)


def ini_escape(text: str) -> str:
    """QSettingsPrivate::iniEscapedString for one value (Qt 5 without an INI
    codec: characters >= 0x7F become \\x escapes, as do the bytes of a @ByteArray)."""
    out = []
    needs_quotes = False
    escape_next_if_digit = False
    for ch in text:
        o = ord(ch)
        if ch in ";,=":
            needs_quotes = True
        if escape_next_if_digit and ch in _HEX:
            out.append("\\x%x" % o)
            continue
        escape_next_if_digit = False
        if ch == "\0":
            out.append("\\0")
            escape_next_if_digit = True
        elif ch in _SIMPLE_ESC:
            out.append("\\" + _SIMPLE_ESC[ch])
        elif o <= 0x1F or o >= 0x7F:
            out.append("\\x%x" % o)
            escape_next_if_digit = True
        else:
            out.append(ch)
    s = "".join(out)
    if needs_quotes or (s and (s[0] == " " or s[-1] == " ")):
        s = '"' + s + '"'
    return s


def ini_value(value) -> str:
    """QSettings' text for a QVariant: bool, int, float, str, or bytes (@ByteArray)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, bytes):
        return ini_escape("@ByteArray(" + value.decode("latin-1") + ")")
    if isinstance(value, str):
        if value.startswith("@"):
            value = "@" + value       # QSettings escapes a leading '@' as '@@'
        return ini_escape(value)
    raise TypeError(f"cannot store {type(value).__name__} in a .pvs")


def ini_unescape(raw: str) -> str | list[str]:
    """QSettingsPrivate::iniUnescapedStringList: quotes, escapes, and unquoted
    commas (which make a string list)."""
    parts: list[str] = []
    cur: list[str] = []
    in_quotes = False
    i, n = 0, len(raw)
    raw = raw.strip(" \t")
    n = len(raw)
    while i < n:
        ch = raw[i]
        if ch == '"':
            in_quotes = not in_quotes
            i += 1
        elif ch == "\\" and i + 1 < n:
            nx = raw[i + 1]
            if nx == "x":
                j = i + 2
                while j < n and raw[j] in _HEX:
                    j += 1
                cur.append(chr(int(raw[i + 2:j], 16)) if j > i + 2 else "x")
                i = j
            elif nx in "01234567":
                j = i + 1
                while j < n and raw[j] in "01234567":
                    j += 1
                cur.append(chr(int(raw[i + 1:j], 8)))
                i = j
            else:
                back = {v: k for k, v in _SIMPLE_ESC.items()}
                cur.append(back.get(nx, nx))
                i += 2
        elif ch == "," and not in_quotes:
            parts.append("".join(cur))
            cur = []
            i += 1
        else:
            cur.append(ch)
            i += 1
    parts.append("".join(cur))
    return parts[0] if len(parts) == 1 else parts


def ini_to_python(raw: str):
    """A stored value back: '@ByteArray(...)' -> bytes, '@@x' -> '@x', else the string."""
    v = ini_unescape(raw)
    if isinstance(v, list):
        return v
    if v.startswith("@ByteArray(") and v.endswith(")"):
        return v[len("@ByteArray("):-1].encode("latin-1")
    if v.startswith("@@"):
        return v[1:]
    return v


def parse_ini(text: str) -> dict[str, dict[str, str]]:
    """Sections -> {key (with '\\' kept) -> raw value text} of a QSettings INI file."""
    out: dict[str, dict[str, str]] = {}
    section = "General"
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith(";") or s.startswith("#"):
            continue
        if s.startswith("[") and s.endswith("]"):
            section = s[1:-1]
            out.setdefault(section, {})
            continue
        if "=" not in s:
            raise ValueError(f"not a QSettings INI line: {line!r}")
        k, v = s.split("=", 1)
        out.setdefault(section, {})[k.strip()] = v.strip()
    return out


# ---------------------------------------------------------------- model

@dataclasses.dataclass
class StackedDecoder:
    id: str
    # option id -> (GVariant type, value); only those that differ from the default
    options: dict[str, tuple[str, object]] = dataclasses.field(default_factory=dict)
    visible: bool = True


@dataclasses.dataclass
class DecodeChannel:
    name: str                       # the decoder's channel name (e.g. 'CLK')
    assigned: str | None = None     # the capture's channel name (e.g. 'SCLK')
    initial_pin_state: int = PIN_SAME_AS_SAMPLE0


@dataclasses.dataclass
class DecodeSignal:
    name: str
    decoders: list[StackedDecoder]
    channels: list[DecodeChannel]   # every channel of the stack, in PulseView's order
    color: int | None = None
    enabled: bool = True


@dataclasses.dataclass
class Setup:
    decode_signals: list[DecodeSignal]
    view_scale: float | None = None   # seconds per pixel; None: zoom to fit
    view_offset: float | None = None  # time at the left edge (with view_scale)


def render(setup: Setup) -> str:
    """The .pvs text of a setup."""
    lines = ["[General]", f"decode_signals={len(setup.decode_signals)}",
             "meta_objs=0", f"views={1 if setup.view_scale else 0}", ""]
    for i, ds in enumerate(setup.decode_signals):
        lines.append(f"[decode_signal{i}]")

        def put(key, value):
            lines.append(f"{ini_key(key)}={ini_value(value)}")

        color = ds.color if ds.color is not None else COLORS[i % len(COLORS)]
        put("name", ds.name)
        put("enabled", ds.enabled)
        put("color", color)
        put("conversion_type", 0)
        put("conv_options", 0)
        put("decoders", len(ds.decoders))
        for j, dec in enumerate(ds.decoders):
            put(f"decoder{j}/id", dec.id)
            put(f"decoder{j}/visible", dec.visible)
            put(f"decoder{j}/options", len(dec.options))
            for k, (name, (t, value)) in enumerate(dec.options.items()):
                put(f"decoder{j}/option{k}/name", name)
                put(f"decoder{j}/option{k}/type", t)
                put(f"decoder{j}/option{k}/value", gvariant_serialize(value, t))
        put("channels", len(ds.channels))
        for c, ch in enumerate(ds.channels):
            put(f"channel{c}/name", ch.name)
            put(f"channel{c}/initial_pin_state", ch.initial_pin_state)
            if ch.assigned is not None:
                put(f"channel{c}/assigned_signal_name", ch.assigned)
        lines.append("")
    if setup.view_scale:
        lines += ["[view0]", f"scale={ini_value(float(setup.view_scale))}"]
        if setup.view_offset is not None:
            lines.append(f"offset={ini_value(boost_timestamp(setup.view_offset))}")
        lines.append("")
    elif setup.view_offset is not None:
        raise ValueError("a view offset needs a view scale")
    return "\n".join(lines)


def _bool(raw: str) -> bool:
    v = ini_to_python(raw)
    if v not in ("true", "false"):
        raise ValueError(f"not a bool: {raw!r}")
    return v == "true"


def read(text: str) -> Setup:
    """Parse a .pvs (ours or PulseView's) into a Setup; raises ValueError on
    anything PulseView would not read the way we mean it."""
    ini = parse_ini(text)
    general = ini.get("General", {})
    n = int(ini_to_python(general.get("decode_signals", "0")))
    signals = []
    for i in range(n):
        sec = ini.get(f"decode_signal{i}")
        if sec is None:
            raise ValueError(f"decode_signals={n} but there is no [decode_signal{i}]")

        def get(key, default=None):
            k = ini_key(key)
            if k not in sec:
                if default is not None:
                    return default
                raise ValueError(f"[decode_signal{i}] has no {k}")
            return sec[k]

        decs = []
        for j in range(int(ini_to_python(get("decoders")))):
            opts = {}
            for k in range(int(ini_to_python(get(f"decoder{j}/options")))):
                name = ini_to_python(get(f"decoder{j}/option{k}/name"))
                t = ini_to_python(get(f"decoder{j}/option{k}/type"))
                data = ini_to_python(get(f"decoder{j}/option{k}/value"))
                if not isinstance(data, bytes):
                    raise ValueError(f"decoder{j} option {name}: value is not a @ByteArray")
                opts[name] = (t, gvariant_deserialize(t, data))
            decs.append(StackedDecoder(ini_to_python(get(f"decoder{j}/id")), opts,
                                       _bool(get(f"decoder{j}/visible", "true"))))
        chans = []
        for c in range(int(ini_to_python(get("channels", "0")))):
            key = ini_key(f"channel{c}/assigned_signal_name")
            chans.append(DecodeChannel(ini_to_python(get(f"channel{c}/name", "")),
                                       ini_to_python(sec[key]) if key in sec else None,
                                       int(ini_to_python(get(f"channel{c}/initial_pin_state", "2")))))
        color = sec.get("color")
        signals.append(DecodeSignal(ini_to_python(get("name", "")), decs, chans,
                                    int(ini_to_python(color)) if color else None,
                                    _bool(get("enabled", "true"))))
    scale = offset = None
    view0 = ini.get("view0", {})
    if int(ini_to_python(general.get("views", "0"))) > 0 and "scale" in view0:
        scale = float(ini_to_python(view0["scale"]))
        if "offset" in view0:
            offset = float(parse_boost_timestamp(ini_to_python(view0["offset"])))
    return Setup(signals, scale, offset)
