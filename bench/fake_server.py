"""The LiteLLM fake in a process of its own, for P1: its CPU (encoding /model/info for every poll) is
then not counted against the measured controller, as a real LiteLLM's would not be.

    python -m bench.fake_server

Prints ``URL <base url>``, then ``W <monotonic seconds> <endpoint> <row id>`` for every write request
as it arrives (CLOCK_MONOTONIC is system-wide: the driver compares it with its own send times). It
stops when its standard input closes.
"""

from __future__ import annotations

import sys

import anyio
import anyio.to_thread

from bench.peers import RecordingFake


async def main() -> None:
    fake = RecordingFake()
    fake.on_write = lambda e: print(f"W {e[0]:.6f} {e[1].replace(' ', '_')} {e[2]}", flush=True)
    async with fake.serving() as url:
        print(f"URL {url}", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)


if __name__ == "__main__":
    anyio.run(main)
