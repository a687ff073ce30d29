"""Capture readers: one module per file format, all behind ``CaptureReader``.

``open_capture`` picks the reader from ``input_format``, else from the file's first
bytes (the extension's readers first, then every other; a file with no content to
go by, .dsl, by its extension; a common non-capture such as a PNG or a gzip file is
named in the error, io/magic.py), then applies the options every format shares:
``channel_map`` (rename channels) and ``deglitch`` (drop short pulses).
Format-specific options (``samplerate``, ``threshold``) go to the reader.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import shlex
import stat

from spigap.findings import Cause, Finding, cause_of
from spigap.errors import InputError, UsageError
from spigap.io.base import (CaptureInfo, CaptureReader, EdgeBlock, ReaderOptions, ReaderSpec, check_stream,
                              resolve_channel, stat_capture)

__all__ = ["READERS", "CaptureInfo", "CaptureReader", "EdgeBlock", "ReaderOptions", "ReaderSpec", "check_stream",
           "open_capture", "parse_channel_map", "resolve_channel", "resolve_channel_key", "stat_capture"]


def _sniff_zip(head: bytes) -> bool:
    return head.startswith(b"PK\x03\x04")


def _sniff_vcd(head: bytes) -> bool:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return text.startswith(b"$") and any(k in head for k in (b"$timescale", b"$var", b"$scope",
                                                              b"$enddefinitions", b"$date", b"$version"))


def _sniff_saleae(head: bytes) -> bool:
    return head.startswith(b"<SALEAE>")


def _sniff_never(head: bytes) -> bool:
    return False


def _lazy_sniff(module: str):
    def sniff(head: bytes) -> bool:
        return importlib.import_module(module).sniff(head)

    return sniff


# The formats, in sniffing order: where extensions overlap (.csv) the first
# reader whose sniff accepts the file wins, and a file no sniff accepts goes
# to the first reader of its extension (which then says what is wrong).
_SPECS = [
    ReaderSpec("sr", (".sr",), _sniff_zip, "spigap.io.sr:SrReader", ("samplerate", "threshold")),
    ReaderSpec("dsl", (".dsl",), _sniff_never, "spigap.io.dsl:DslReader"),   # a zip like .sr: by extension
    ReaderSpec("vcd", (".vcd",), _sniff_vcd, "spigap.io.vcd:VcdReader"),
    # .bin: Siglent's reader first, so that a .bin no sniff accepts gets its message (it names
    # every vendor whose .bin is read); its sniff (no magic: a plausible header) cannot accept
    # a Saleae, Keysight or Rigol file, which start with ASCII
    ReaderSpec("siglent-bin", (".bin",), _lazy_sniff("spigap.io.siglent_bin"),
               "spigap.io.siglent_bin:SiglentBinReader", ("samplerate", "threshold")),
    ReaderSpec("saleae", (".bin",), _sniff_saleae, "spigap.io.saleae:SaleaeReader", ("samplerate", "threshold")),
    ReaderSpec("csv", (".csv", ".txt"), _lazy_sniff("spigap.io.csv_changes"),
               "spigap.io.csv_changes:ChangeCsvReader"),
    ReaderSpec("sigrok-csv", (".csv",), _lazy_sniff("spigap.io.sigrok_csv"),
               "spigap.io.sigrok_csv:SigrokCsvReader"),
    ReaderSpec("scope-csv", (".csv", ".txt", ".tsv"), _lazy_sniff("spigap.io.scope_csv"),
               "spigap.io.scope_csv:ScopeCsvReader", ("samplerate", "threshold")),
    # oscilloscopes' own files (io/scopefile.py and one module per format)
    ReaderSpec("isf", (".isf",), _lazy_sniff("spigap.io.isf"), "spigap.io.isf:IsfReader",
               ("samplerate", "threshold")),
    # .wfm: Rigol's reader first, so that a .wfm no sniff accepts gets its message (it names both
    # vendors; a DHO .wfm, whose magic is too weak to sniff, gets its own)
    ReaderSpec("rigol-wfm", (".wfm",), _lazy_sniff("spigap.io.rigol_wfm"), "spigap.io.rigol_wfm:RigolWfmReader",
               ("samplerate", "threshold")),
    ReaderSpec("tek-wfm", (".wfm",), _lazy_sniff("spigap.io.tek_wfm"), "spigap.io.tek_wfm:TekWfmReader",
               ("samplerate", "threshold")),
    ReaderSpec("lecroy-trc", (".trc",), _lazy_sniff("spigap.io.lecroy_trc"), "spigap.io.lecroy_trc:LecroyTrcReader",
               ("samplerate", "threshold")),
    ReaderSpec("keysight-h5", (".h5", ".hdf5"), _lazy_sniff("spigap.io.keysight_h5"),
               "spigap.io.keysight_h5:KeysightH5Reader", ("samplerate", "threshold")),
    ReaderSpec("keysight-bin", (".bin",), _lazy_sniff("spigap.io.keysight_bin"),
               "spigap.io.keysight_bin:KeysightBinReader", ("samplerate", "threshold")),
    # headerless raw sample words: only with --input-format raw (never sniffed, no extension)
    ReaderSpec("raw", (), _sniff_never, "spigap.io.raw:RawReader", ("samplerate", "unitsize")),
]
READERS: dict[str, ReaderSpec] = {spec.name: spec for spec in _SPECS}


def open_capture(path, *, input_format: str | None = None, samplerate: float | None = None,
                 threshold=None, channel_map=None, deglitch: float | None = None,
                 unitsize: int | None = None) -> CaptureReader:
    """Open a capture with the right reader.

    ``threshold``: ``[CH=]V[,HYST]`` string(s) or {channel: volts} for analog channels;
    ``channel_map``: "0=SCLK,1=MOSI" or {key: name}; ``deglitch``: ns (pulses shorter
    than this are dropped on every channel); ``unitsize``: bytes per sample word of
    raw input. ``path`` "-" reads standard input (VCD or raw samples). ``path`` may be a
    list of files: the files of one acquisition (a scope's one file per channel), read
    as one capture when they share a time base (io/combine.py)."""
    paths = [os.fspath(p) for p in path] if isinstance(path, (list, tuple)) else [os.fspath(path)]
    path = paths[0] if len(paths) == 1 else " + ".join(paths)
    cmap = parse_channel_map(channel_map, path=path)
    if cmap and threshold is not None:
        threshold = _thresholds_to_original(threshold, cmap)
    opts = ReaderOptions(samplerate=samplerate, threshold=threshold, unitsize=unitsize)
    reader = _open(paths[0], input_format, opts) if len(paths) == 1 else _open_many(paths, input_format, opts)
    try:
        if threshold is not None and not reader.info.analog_channels:
            reader.info.warnings.append(Finding("--threshold has no effect: the capture has no analog channels", Cause.NOTE))
        reader.info.analog_asked = threshold is not None
        if cmap:
            reader = RenamedReader(reader, cmap)
        if deglitch:
            if not deglitch > 0:
                raise UsageError(f"--deglitch must be a positive time in ns, not {deglitch!r}", path=path)
            from spigap.io.deglitch import DeglitchedReader

            reader = DeglitchedReader(reader, float(deglitch))
    except BaseException:
        reader.close()
        raise
    return reader


def _open_many(paths: list[str], input_format, opts: ReaderOptions) -> CaptureReader:
    """Several files of one acquisition as one capture. A ``--threshold`` that names a
    channel goes to the file that has it (each file resolves its own channels)."""
    from spigap.io.combine import CombinedReader
    from spigap.io.threshold import normalize_threshold_option

    if "-" in paths:
        raise UsageError("standard input cannot be combined with other files", path=" + ".join(paths))
    readers: list[CaptureReader] = []
    try:
        for p in paths:
            readers.append(_open(p, input_format, dataclasses.replace(opts, threshold=None)))
        if opts.threshold is not None:
            spec = normalize_threshold_option(opts.threshold)
            names = [n for r in readers for n in r.info.channels]
            for key, _ in spec:
                if key is not None and resolve_channel(key, names) is None:
                    raise UsageError(f"--threshold names channel {key!r}, but the files have: {', '.join(names)}",
                                     path=" + ".join(paths))
            for k, r in enumerate(readers):
                mine = [(key, thr) for key, thr in spec
                        if key is None or resolve_channel(key, r.info.channels) is not None]
                if mine:
                    r.close()
                    readers[k] = _open(paths[k], input_format, dataclasses.replace(opts, threshold=mine))
        return CombinedReader(readers)
    except BaseException:
        for r in readers:
            r.close()
        raise


def _open(path, input_format, opts: ReaderOptions) -> CaptureReader:
    """One file's reader, its time base checked (``check_time_base``)."""
    reader = _open_file(path, input_format, opts)
    try:
        check_time_base(reader.info)
    except BaseException:
        reader.close()
        raise
    return reader


_SOURCE_WORDS = {"file": "the file's header", "metadata": "the file's metadata", "header": "the file's header"}


def check_time_base(info: CaptureInfo) -> None:
    """Every reader's time base against spigap.limits: a tick outside 1 fs .. 1 s is refused
    (a damaged header, a wrong unit: every time derived from it would be absurd, and the
    plots' bins and a conversion's samples with them); a sampled capture's rate outside
    1 kHz .. 1 THz is read with a warning."""
    from spigap.limits import odd_samplerate, tick_problem

    problem = tick_problem(info.tick_s)
    if problem is not None:
        src = info.resolution_source
        where = f" (from {_SOURCE_WORDS.get(src, src)})" if src else ""
        raise InputError(f"{problem}{where}", path=info.path,
                         hint="if the file's time unit or sample rate is wrong, give the rate with --samplerate")
    if info.samplerate_hz:
        odd = odd_samplerate(info.samplerate_hz)
        # the readers that know their format's own words for it have said so already
        if odd is not None and not any("implausib" in w for w in info.warnings):
            info.warnings.append(Finding(f"{odd}; if the file's rate is wrong, give the real one with --samplerate",
                                         cause_of(odd)))


def _open_file(path, input_format, opts: ReaderOptions) -> CaptureReader:
    if path == "-":                      # standard input: VCD or raw samples (io/stdin.py)
        from spigap.io.stdin import open_stdin

        return open_stdin(input_format, opts)
    if input_format and input_format not in READERS:
        raise InputError(f"unknown input format {input_format!r}; known: {', '.join(READERS)}", path=path)
    st = stat_capture(path)
    mode = st.st_mode
    if stat.S_ISREG(mode) and st.st_size == 0:
        # before any reader: each would say what its format misses ("not a zip archive", "no
        # header"), and its hint (another --input-format) cannot help a file with nothing in it
        raise InputError("is empty (0 bytes): no capture was saved in it", path=path,
                         hint="save or copy the capture again")
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        # a FIFO or a device: read once as a stream, or refused where the format needs a file
        from spigap.io.stdin import open_special

        return open_special(path, mode, input_format, opts)
    if input_format:
        return READERS[input_format].open(path, opts)
    if stat.S_ISDIR(mode):
        from spigap.io.saleae import is_saleae_dir

        if is_saleae_dir(path):
            return READERS["saleae"].open(path, opts)
        raise InputError("is a directory, not a capture (no Saleae digital_N.bin/analog_N.bin inside)",
                         path=path, hint=f"for every capture in it: spigap batch {shlex.quote(str(path))}")
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise InputError(f"cannot open: {e.strerror}", path=path) from None
    # the content first: the readers of the extension, then every other; a format that has no
    # content to recognize it by (.dsl, a zip like .sr) by its extension
    ext = os.path.splitext(path)[1].lower()
    by_ext = [spec for spec in READERS.values() if ext in spec.extensions]
    for spec in by_ext:
        if spec.sniff(head):
            return spec.open(path, opts)
    if len(by_ext) == 1 and by_ext[0].sniff is _sniff_never:
        return by_ext[0].open(path, opts)
    for spec in READERS.values():
        if spec not in by_ext and spec.sniff(head):
            return spec.open(path, opts)
    from spigap.io.magic import not_a_capture

    other = not_a_capture(head)
    if other is not None:
        raise InputError(f"this is {other[0]}, not a capture", path=path, hint=other[1])
    if by_ext:
        # no reader recognizes the content: let the first reader of the extension say what is wrong
        return by_ext[0].open(path, opts)
    raise InputError("unknown capture format", path=path,
                     hint=f"use --input-format ({', '.join(READERS)})")


# -------------------------------------------------------------- channel names
def parse_channel_map(value, *, path: str | None = None) -> dict[str, str]:
    """``"0=SCLK,1=MOSI"`` (or a list of such strings, or a dict) -> {key: new name}."""
    if not value:
        return {}
    if isinstance(value, dict):
        items = [(str(k), str(v)) for k, v in value.items()]
    else:
        if isinstance(value, str):
            value = [value]
        items = []
        for text in value:
            for part in str(text).split(","):
                if not part.strip():
                    continue
                if "=" not in part:
                    raise UsageError(f"bad --channel-map entry {part.strip()!r}", path=path,
                                     hint="use CHANNEL=NAME pairs, e.g. 0=SCLK,1=MOSI,2=MISO,3=CS")
                k, v = part.split("=", 1)
                items.append((k.strip(), v.strip()))
    out: dict[str, str] = {}
    for k, v in items:
        if not k or not v:
            raise UsageError(f"bad --channel-map entry {k}={v}", path=path,
                             hint="use CHANNEL=NAME pairs, e.g. 0=SCLK,1=MOSI")
        out[k] = v
    return out


def resolve_channel_key(key: str, names: list[str], aliases: dict[str, str]) -> int | None:
    """Index of the channel a --channel-map key means (names, aliases, then positions)."""
    return resolve_channel(key, names, aliases, positional=True)


def _thresholds_to_original(threshold, cmap: dict[str, str]):
    """--threshold may name a channel by its --channel-map name: use the original key."""
    from spigap.io.threshold import normalize_threshold_option

    back: dict[str, str] = {}
    for k, v in cmap.items():
        back.setdefault(v, k)
        back.setdefault(v.lower(), k)
    return [((back.get(k, back.get(k.lower(), k)) if k is not None else None), thr)
            for k, thr in normalize_threshold_option(threshold)]


class RenamedReader(CaptureReader):
    """A reader whose channels carry the names given by ``--channel-map``."""

    def __init__(self, inner: CaptureReader, cmap: dict[str, str]):
        self.inner = inner
        self.format_name = inner.format_name
        names = list(inner.info.channels)
        aliases = inner.info.channel_keys
        new = list(names)
        for key, name in cmap.items():
            idx = resolve_channel_key(key, names, aliases)
            if idx is None:
                raise UsageError(f"--channel-map names channel {key!r}, but the capture has: {', '.join(names)}",
                                 path=inner.info.path)
            new[idx] = name
        if len(set(new)) != len(new):
            dup = sorted({n for n in new if new.count(n) > 1})
            raise UsageError(f"--channel-map gives two channels the name {dup[0]!r}", path=inner.info.path)
        self._orig = dict(zip(new, names))
        # own info, same warnings list as the inner reader's
        self.info = dataclasses.replace(inner.info, channels=new, original_channels=names, spi_channels={
            role: new[names.index(ch)] for role, ch in inner.info.spi_channels.items() if ch in names},
            analog_channels=[new[names.index(ch)] for ch in inner.info.analog_channels if ch in names])

    @property
    def end_tick(self):
        return self.inner.end_tick

    @end_tick.setter
    def end_tick(self, value):
        pass

    def edges(self, channels):
        orig = [self._orig[self.info.channels[self.channel_index(c)]] for c in channels]
        return self.inner.edges(orig)

    def set_volts_tap(self, tap) -> None:
        new = {o: n for n, o in self._orig.items()}
        self.inner.set_volts_tap(None if tap is None else (lambda name, t0, v: tap(new.get(name, name), t0, v)))

    def close(self) -> None:
        self.inner.close()
