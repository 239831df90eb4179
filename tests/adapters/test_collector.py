"""``CollectorPause``: off while paused, back on after, and never on where its host turned it off."""

from __future__ import annotations

import gc

from adapters.collector import CollectorPause


def test_pause_and_resume() -> None:
    pause = CollectorPause(enabled=True)
    assert gc.isenabled()
    pause.pause()
    pause.pause()  # twice: still one pause, one resume ends it
    assert not gc.isenabled() and pause.pauses == 1
    pause.resume()
    assert gc.isenabled()
    pause.resume()  # nothing paused: nothing to do
    assert gc.isenabled()


def test_a_collector_the_host_turned_off_stays_off() -> None:
    pause = CollectorPause(enabled=True)
    gc.disable()
    try:
        pause.pause()
        pause.resume()
        assert not gc.isenabled() and pause.pauses == 0
    finally:
        gc.enable()


def test_not_enabled_does_nothing() -> None:
    pause = CollectorPause(enabled=False)
    pause.pause()
    assert gc.isenabled() and pause.pauses == 0
    pause.resume()
    assert gc.isenabled()
