"""The one definition of what stops a spigap process (analyzer/spigap/stopping.py), in this
process: the CLI's SIGTERM/SIGHUP -> Stopped, and batch's deferral to the check between
waits. The whole processes (spigap batch stopped by a signal, its workers gone, the output
untouched): tests/test_faults.py and tests/test_batch_limits.py."""

from __future__ import annotations

import contextlib
import os
import signal

import pytest

from spigap import stopping


@contextlib.contextmanager
def disposition(sig, handler):
    """``sig`` at ``handler`` for the block, whatever the test run inherited (a suite under
    nohup ignores SIGHUP)."""
    old = signal.signal(sig, handler)
    try:
        yield
    finally:
        signal.signal(sig, old)


@pytest.mark.parametrize("sig", stopping.STOP_SIGNALS)
def test_a_stop_signal_raises_stopped(sig):
    with disposition(sig, signal.SIG_DFL):
        with pytest.raises(stopping.Stopped) as e:
            with stopping.stop_on_signals():
                os.kill(os.getpid(), sig)
                signal.sigtimedwait([], 0)        # a point where Python runs the handler
        assert (e.value.signum, e.value.name) == (sig, signal.Signals(sig).name)
        assert isinstance(e.value, KeyboardInterrupt)          # unwound like Ctrl-C
        assert signal.getsignal(sig) is signal.SIG_DFL         # put back


@pytest.mark.parametrize("sig", stopping.STOP_SIGNALS)
def test_between_waits_a_stop_signal_is_acted_on_at_the_check(sig):
    with disposition(sig, signal.SIG_DFL), stopping.stop_on_signals():
        with pytest.raises(stopping.Stopped) as e:
            with stopping.between_waits() as check:
                check()                                # nothing noted: nothing happens
                os.kill(os.getpid(), sig)
                signal.sigtimedwait([], 0)
                reached = True                         # noted, not raised here
                check()
        assert reached and e.value.signum == sig
        assert signal.getsignal(sig) is stopping._raise_stopped     # the CLI's handler is back


def test_between_waits_ctrl_c_is_a_keyboard_interrupt_at_the_check():
    with disposition(signal.SIGINT, signal.default_int_handler):
        with pytest.raises(KeyboardInterrupt) as e:
            with stopping.between_waits() as check:
                os.kill(os.getpid(), signal.SIGINT)
                signal.sigtimedwait([], 0)
                reached = True
                check()
        assert reached and not isinstance(e.value, stopping.Stopped)


def test_a_handler_that_returns_has_handled_the_signal():
    seen = []
    with disposition(signal.SIGTERM, lambda s, f: seen.append(s)):
        with stopping.between_waits() as check:
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0)
            check()
            check()                                    # once
        assert seen == [signal.SIGTERM]


@pytest.mark.parametrize("sig", stopping.ENDING_SIGNALS)
def test_an_ignored_signal_stays_ignored(sig):
    with disposition(sig, signal.SIG_IGN):
        with stopping.stop_on_signals(), stopping.between_waits() as check:
            assert signal.getsignal(sig) is signal.SIG_IGN
            os.kill(os.getpid(), sig)
            signal.sigtimedwait([], 0)
            check()                                    # nothing noted
        assert signal.getsignal(sig) is signal.SIG_IGN


def test_the_cli_and_batch_use_the_one_definition():
    """No second list of stop signals: the CLI's runtime and batch take stopping's."""
    from spigap.batch import execute, worker
    from spigap.cli import runtime

    for mod in (runtime, execute, worker):
        assert not hasattr(mod, "Stopped") and getattr(mod, "STOP_SIGNALS", stopping.STOP_SIGNALS) is \
            stopping.STOP_SIGNALS, mod.__name__


# ---------------------------------------------------- Ending (spigap monitor's end)
@contextlib.contextmanager
def cli_signals():
    """As under the CLI: Ctrl-C raises KeyboardInterrupt, SIGTERM/SIGHUP raise Stopped."""
    with disposition(signal.SIGINT, signal.default_int_handler), disposition(signal.SIGTERM, signal.SIG_DFL), \
            disposition(signal.SIGHUP, signal.SIG_DFL), stopping.stop_on_signals():
        yield


@pytest.mark.parametrize("sig", stopping.ENDING_SIGNALS)
def test_ending_raises_the_first_signal_where_the_run_waits(sig):
    with cli_signals():
        with stopping.Ending() as end:
            with pytest.raises(KeyboardInterrupt) as e:
                os.kill(os.getpid(), sig)
            assert isinstance(e.value, stopping.Stopped) == (sig != signal.SIGINT)
            assert end.signum == sig
            assert (end.stopped is not None) == (sig != signal.SIGINT)
            with end.held():
                pass                # after the first: nothing more is raised at a section's end
        # put back as the CLI had it (checked inside cli_signals: outside it SIGINT is what the
        # test process inherited, ignored when the suite runs in the background)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ending_holds_a_signal_to_the_end_of_a_section():
    with cli_signals(), stopping.Ending() as end:
        done = []
        with pytest.raises(stopping.Stopped):
            with end.held():
                os.kill(os.getpid(), signal.SIGTERM)
                done.append(1)      # the section runs to its end
        assert done == [1] and end.stopped is not None and end.stopped.name == "SIGTERM"


def test_ending_after_close_notes_the_first_signal_and_a_second_ends_at_once():
    with cli_signals(), stopping.Ending() as end:
        end.close()                 # the input ended: the summary is being written
        os.kill(os.getpid(), signal.SIGHUP)
        assert end.signum == signal.SIGHUP
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)     # a second: at once (a blocked output cannot hold it)
        assert end.stopped is not None and end.stopped.signum == signal.SIGHUP


def test_ending_leaves_an_ignored_signal_ignored():
    with cli_signals(), disposition(signal.SIGHUP, signal.SIG_IGN), stopping.Ending() as end:
        os.kill(os.getpid(), signal.SIGHUP)
        assert end.signum is None and signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
