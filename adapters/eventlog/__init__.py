"""The event log store: the recorder (append, rotate, ring dump) and the streaming reader."""
