"""Keysight Infiniium ``.h5`` waveform files (HDF5), read with h5py.

Layout (Keysight Infiniium user's guide, "H5 waveform files"; checked on a
real MSO9254A file, tests/data/scopes/README.md): ``/FileType/KeysightH5FileType``
reads "Keysight Waveform" (older firmware: "Agilent Waveform"); the group
``/Waveforms`` holds one group per saved waveform ("Channel 1", "Memory 1" ...)
with attributes ``NumPoints``, ``XInc``, ``XOrg``, ``XUnits`` ("Second"),
``YInc``, ``YOrg``, ``NumSegments``, and its samples in the dataset
``<group name>Data``: float32 volts, or integer ADC codes with volts =
code * YInc + YOrg. ``/Frame/TheFrame`` names the model and serial number.

h5py reads the dataset slice by slice (HDF5 decompresses one chunk at a
time), so memory stays bounded; h5py is the optional extra ``spigap[scopes]``.
Segmented (NumSegments > 1) waveforms are refused.
"""

from __future__ import annotations

from spigap.errors import InputError
from spigap.io.scopefile import Waveform, WaveformReader, check_waveform, need, unique_names

MAGIC = b"\x89HDF\r\n\x1a\n"


def sniff(head: bytes) -> bool:
    return head.startswith(MAGIC)


def _text(v) -> str:
    if hasattr(v, "tobytes") and not isinstance(v, (bytes, str)):
        v = v.tobytes() if getattr(v, "dtype", None) is not None and v.dtype.kind == "S" else v
    if isinstance(v, bytes):
        v = v.split(b"\0", 1)[0].decode("latin-1")
    return str(v).strip()


class KeysightH5Reader(WaveformReader):
    format_name = "keysight-h5"

    def __init__(self, path, *, samplerate: float | None = None, threshold=None):
        path = str(path)
        h5py = need("h5py", "Keysight .h5", path)
        try:
            self._file = h5py.File(path, "r")
        except OSError as e:
            raise InputError(f"not a readable HDF5 file ({e})", path=path) from None
        try:
            try:
                waves, model = self._waveforms(path)
            except (KeyError, ValueError, TypeError, OSError, RuntimeError, AttributeError) as e:
                # h5py reports a damaged object table as any of these
                raise InputError(f"a damaged HDF5 structure ({type(e).__name__}: {e})", path=path) from None
            super().__init__(path, waves, fmt=f"Keysight .h5 ({model})" if model else "Keysight .h5",
                             samplerate=samplerate, threshold=threshold)
        except BaseException:
            self._file.close()
            raise

    def _waveforms(self, path: str):
        f = self._file
        kind = _text(f["FileType/KeysightH5FileType"][()]) if "FileType/KeysightH5FileType" in f else ""
        if not kind.endswith("Waveform") or "Waveforms" not in f:
            raise InputError("an HDF5 file, but not a Keysight/Agilent waveform file (no /FileType "
                             "'Keysight Waveform' and /Waveforms)", path=path)
        model = ""
        if "Frame/TheFrame" in f:
            try:
                model = _text(f["Frame/TheFrame"][()]["Model"])
            except (KeyError, ValueError, TypeError, IndexError):
                model = ""
        return self._read_groups(path, f, model)

    def _read_groups(self, path, f, model):
        waves, names = [], []
        for name, group in f["Waveforms"].items():
            a = group.attrs
            ds = group.get(f"{name}Data")
            if ds is None or ds.ndim != 1:
                continue
            if int(a.get("NumSegments", 0)) > 1:
                raise InputError(f"{name}: a segmented waveform ({int(a['NumSegments'])} segments) is not "
                                 "supported", path=path, hint="save a single acquisition")
            xunits = _text(a.get("XUnits", b"Second")).lower()
            if xunits not in ("second", "s", ""):
                raise InputError(f"{name}: not a time-domain waveform (XUnits {xunits!r})", path=path)
            n = int(min(int(a.get("NumPoints", ds.shape[0])), ds.shape[0]))
            integer = ds.dtype.kind in "iu"
            wf = Waveform(name=name, n=n, dt=float(a["XInc"]), t0=float(a["XOrg"]), path=path,
                          scale=float(a.get("YInc", 1.0)) if integer else 1.0,
                          shift=float(a.get("YOrg", 0.0)) if integer else 0.0,
                          read=lambda lo, hi, ds=ds: _slice(ds, lo, hi, path))
            check_waveform(wf, f"waveform {name}")
            waves.append(wf)
            names.append(name)
        if not waves:
            raise InputError("the file holds no waveform data set", path=path)
        for wf, n in zip(waves, unique_names(names)):
            wf.name = n
        return waves, model

    def close(self) -> None:
        self._file.close()


def _slice(ds, lo: int, hi: int, path: str):
    try:
        return ds[lo:hi]
    except (OSError, ValueError, KeyError, RuntimeError) as e:   # a damaged chunk: HDF5 cannot inflate it
        raise InputError(f"samples {lo}..{hi} cannot be read ({e})", path=path) from None
