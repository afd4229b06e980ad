"""SIGTERM as Ctrl-C (banana_tests.termination): once, over the default action only, never in
another project's run."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from banana_tests.termination import Terminated, interrupt_status, sigterm_stops, stop_on_sigterm


@pytest.fixture(autouse=True)
def default_sigterm() -> Iterator[None]:
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGTERM, before)


def test_sigterm_raises_terminated_once_then_ends_the_process_again() -> None:
    assert stop_on_sigterm()
    with pytest.raises(Terminated, match="SIGTERM received"):
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs at the next bytecode
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert interrupt_status(Terminated()) == 143 and interrupt_status(KeyboardInterrupt()) == 130


@pytest.mark.parametrize("theirs", [signal.SIG_IGN, lambda signum, frame: None], ids=["ignored", "handler"])
def test_a_disposition_someone_else_chose_is_left_alone(theirs: signal.Handlers) -> None:
    signal.signal(signal.SIGTERM, theirs)
    assert not stop_on_sigterm()
    with sigterm_stops():
        assert signal.getsignal(signal.SIGTERM) is theirs
    assert signal.getsignal(signal.SIGTERM) is theirs


def test_the_block_puts_the_default_back() -> None:
    with sigterm_stops():
        assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_another_projects_run_touches_no_signal(pytester: pytest.Pytester) -> None:
    """The plugin is a guest: a run of someone else's tests finds SIGTERM as it was."""
    test = "def test_default():\n    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL\n"
    pytester.makepyfile(test_theirs=f"import signal\n\n{test}")
    pytester.runpytest_inprocess("-p", "no:randomly").assert_outcomes(passed=1)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
