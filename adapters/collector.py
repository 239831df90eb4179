"""``CollectorPause``: the cyclic garbage collector kept off while a large answer is parsed and reduced.

Why (bench P1 at 10,000 models): ``/model/info`` at 10,000 rows is ~15 MiB of JSON, ~500,000 new
containers. Parsing it takes ~55 ms; with the collector on, its passes over the half-built document
(many: the heap frozen after the first sync leaves the full-pass rule little to weigh them against) made
it up to ~110 ms. A pause that long delays one watch event by as much, and three changes 100 ms apart can
then arrive as one burst, which the write damping holds for its settle window. Off from the parse until
the document is dropped, the parse stays at ~55 ms and the document is freed by reference counting, never
walked. What was made meanwhile is collected as usual afterwards.

Process-wide, like the heap freeze (``app.heap``): only a host that lets the catalog manage the collector
turns it on (``model-catalog run`` does). A pause never enables a collector its host had disabled.
"""

from __future__ import annotations

import gc


class CollectorPause:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._paused = False
        self.pauses = 0

    def pause(self) -> None:
        """Turn the collector off until ``resume``, if it is on and pausing is enabled."""
        if self.enabled and not self._paused and gc.isenabled():
            gc.disable()
            self._paused = True
            self.pauses += 1

    def resume(self) -> None:
        """Turn the collector back on if ``pause`` turned it off; otherwise nothing."""
        if self._paused:
            self._paused = False
            gc.enable()
