"""Names vulture reports as unused that are used, each with the reason (make lint runs
vulture over analyzer/ and decoders/ with this file; a new report is dead code to remove
or a use to name here)."""

# ruff: noqa
_ = object()

# PEP 562: spigap.analyze_file & co. are handed out lazily (analyzer/spigap/__init__.py)
__getattr__

# callback signatures fixed by their callers: signal handlers, argparse.Action.__call__,
# context managers' __exit__
signum  # analyzer/spigap/batch/worker.py
namespace, option_string  # analyzer/spigap/cli/__init__.py
exc  # analyzer/spigap/io/base.py

# io.RawIOBase's protocol, called by io.BufferedReader (analyzer/spigap/infile.py _Prefixed)
_.readable, _.readinto

# readers are found through the registry (io/__init__.py ReaderSpec entries), not by name
ChangeCsvReader, DslReader, SaleaeReader, ScopeCsvReader, SigrokCsvReader
IsfReader, KeysightBinReader, KeysightH5Reader, LecroyTrcReader, RigolWfmReader, SiglentBinReader, TekWfmReader

# CaptureInfo: the reader API's record of what a reader read (spigap.api users see it;
# deglitch_ns is also checked by the tests)
resolution_source, samplerate_metadata, time_offset_s, original_channels, deglitch_ns
_.deglitch_ns
# a Saleae analog waveform header field unpacked with the others (its trigger time: unused)
trig

# engine instrumentation and switches the tests use (tests/test_parallel.py, test_engines.py)
_.n_parallel
use_engine
# synthesis pieces the tests use: the MCP2518FD access plan, raw sample files (tests/test_monitor.py)
plan
write_raw
# one form's recipe read from a file or text (Scenario.from_toml, Bus.from_toml): the tests'
# and scripts' way in when they know the form (spigap.synth.load reads either)
from_toml
# kernel.Latencies fields, read by name in synth/kernel.py's phase table and bus.py's controller
gpio_cs_latency, gpio_cs_off_latency, transfer_start_to_sclk, sclk_to_transfer_stop
transfer_stop_to_set_cs, deassert_to_done, done_to_idle, idle_to_exit, enter_to_submit
submit_to_busy, busy_to_start, start_to_set_cs
# dataclass fields written to JSON through dataclasses.asdict (timing/model.py, timing/profiles.py)
requested_s, primitive
controller, userspace

# libsigrokdecode reads these from a decoder class (API 3): api_version, license, tags, and
# the metadata() callback
api_version, license, tags
_.metadata
# the MCP3x0x frame length helper: checked against the datasheet in tests/test_decoder_mcp3008.py
frame_clocks
# AD7606 helpers the analyzer hook's users and tests/test_decoder_ad7606.py call (read length, 16-bit code)
expected_sclks, signed16
# synth/traffic modules' [payload] fillers, found by name (traffic.payloads(), like SCENARIOS)
PAYLOADS
# the mcp320x driver's own decode of a read, the oracle of tests/test_driver_sequences.py
linux_code
# read by Python's import system (resources.load_plain_module's bare package)
_.submodule_search_locations
# decoders/mcp2518fd: the LEN byte of a READ_CRC/WRITE_CRC transfer, part of the decode
# result (Transfer) beside its address and data
_.len_byte
# the profile/device file format version: checked as it is read (timing/toml_tables.py), not used after
schema
# warnings.showwarning replaced (cli/runtime.py: library warnings as one line each)
_.showwarning
# the file protocol of outfile's wrapped files (callers may use writelines)
_.writelines
# the shared-bus scenario as TOML text: called in the subprocess spigap bench synthesizes its
# shared-bus capture in (bench.shared_capture's code string)
toml_text
# pins: a suggestion's device-tree property (pins/advice.py), read in its JSON and by the tests
_.prop
# pins: every value of a figure kept for the tests against the analog generator's truth, edge
# by edge (PinOptions(record=True), tests/test_pins.py)
_.recorded
# synth/analog_bus.py: the exact 10-90 % time of an RC edge, the rise-time truth of tests/test_pins.py
_.rise_time

# the stall search's Python API (docs/compare-and-report.md, "Stalls"): the list alone, as
# the documented example and the tests call it (the commands read core/run.py's StallReport)
find_stalls
# the device checks' extra channels from a file of their own (docs/timing-model.md, "From Python");
# the commands take them from their analysis's pass (extra_channels.tracks)
events_for_check
# zipfile.ZipInfo fields that zipfile reads when it writes a member (outfile.zip_entry)
external_attr
