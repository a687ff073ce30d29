"""The one in-memory form of a trace, whatever file it came from.

Columnar (numpy arrays, one row per event, sorted by time) so that a trace of
millions of events costs tens of bytes per event and the aligner works on
whole columns. Strings (event names, devices, tasks) are interned: a column
holds an index into a short list.

Event names are ``subsystem:event`` plus, where one argument tells otherwise
identical events apart, ``:argument`` — ``spi:spi_set_cs:activate``,
``spi:spi_set_cs:deactivate``, ``spi:spi_message_done``, ``sched:sched_switch``,
``gpio:gpio_value``, ``syscalls:sys_enter_ioctl``. User-space timestamp logs use
``user:<column>`` (``user:before``, ``user:after``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

# the SPI tracepoints (include/trace/events/spi.h), as named in Trace.events
SPI_MESSAGE_SUBMIT = "spi:spi_message_submit"
SPI_MESSAGE_START = "spi:spi_message_start"
SPI_MESSAGE_DONE = "spi:spi_message_done"
SPI_SET_CS_ACTIVATE = "spi:spi_set_cs:activate"
SPI_SET_CS_DEACTIVATE = "spi:spi_set_cs:deactivate"
SPI_TRANSFER_START = "spi:spi_transfer_start"
SPI_TRANSFER_STOP = "spi:spi_transfer_stop"
GPIO_VALUE = "gpio:gpio_value"

# bus edges on the merged timeline (phases.py, perfetto.py)
BUS_CS_ASSERT = "bus:cs_assert"
BUS_FIRST_SCLK = "bus:first_sclk"
BUS_LAST_SCLK = "bus:last_sclk"
BUS_CS_DEASSERT = "bus:cs_deassert"


@dataclasses.dataclass
class Trace:
    """Events of one trace file on the trace's own clock.

    Every column has one row per event, rows sorted by ``ts`` (stable: the
    file's order among equal timestamps). -1 / 0 mean "not in this event".
    """

    path: str
    source: str                 # "ftrace" (trace/trace_pipe), "trace-cmd", "perf", "userlog"
    ts: np.ndarray              # float64: seconds on the trace clock
    cpu: np.ndarray             # int16: CPU number, -1 unknown
    pid: np.ndarray             # int32: PID, -1 unknown
    task: np.ndarray            # int32: index into ``tasks``, -1 unknown
    event: np.ndarray           # int32: index into ``events``
    device: np.ndarray          # int32: index into ``devices`` ("spi0.0"; "spi0" for controller events), -1
    ptr: np.ndarray             # uint64: the hashed %p of the message/transfer, 0 when none
    length: np.ndarray          # int64: len= in bytes (spi_message_done: the actual length), -1
    gpio: np.ndarray            # int32: gpio_value's GPIO number, -1 (its value is the ``value`` column)
    value: np.ndarray           # int8: gpio_value's level 0/1, -1
    events: list[str]
    devices: list[str]
    tasks: list[str]
    # tx/rx bytes of spi_transfer_start/stop rows that printed them: row -> (tx, rx), None = "[]"
    payload: dict[int, tuple[bytes | None, bytes | None]]
    resolution_s: float         # the timestamps' printed resolution (1e-6 for 6 decimals, 1e-9 for 9)
    n_lines: int = 0            # lines read
    n_skipped: int = 0          # lines that were no event (headers, comments, unparsable; see warnings)
    lost_events: int = 0        # events the file says were lost (ring-buffer overruns), when it says so
    warnings: list[str] = dataclasses.field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ts)

    def code(self, name: str) -> int:
        """Index of an event name in ``events``; -1 when the trace has no such event."""
        try:
            return self.events.index(name)
        except ValueError:
            return -1

    def rows(self, name: str, device: str | None = None) -> np.ndarray:
        """Row numbers of one event (optionally of one device), in time order."""
        c = self.code(name)
        if c < 0:
            return np.empty(0, np.int64)
        m = self.event == c
        if device is not None:
            d = self.devices.index(device) if device in self.devices else -2
            m &= self.device == d
        return np.flatnonzero(m)
