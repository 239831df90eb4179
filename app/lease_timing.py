"""Leader election's timing, declared once: the settings' defaults, ``LeaseConfig``'s and ``--help`` read it
(a module of its own, importing nothing, so the settings and the elector both can)."""

# The watches' liveness signal listens for the renewals, so its verdict follows from the retry period. A
# renewal is one update of the Lease, the leader's only request at idle: every 4 s, 15 a minute. The
# liveness verdict comes one retry period plus ``Liveness.late_allowance`` (3 s) after the last renewal
# heard, so a half-open or black-holed connection is given up within 7 s. A leader that cannot renew steps
# down within retry period + renew deadline (14 s) of its last renewal, before a standby may take the Lease
# (the lease duration the holder wrote, 15 s, after it saw that renewal); a standby takes over a crashed
# leader's Lease 15-19 s after its last renewal (a released one at once).
LEASE_DURATION_SECONDS = 15.0
LEASE_RENEW_DEADLINE_SECONDS = 10.0
LEASE_RETRY_PERIOD_SECONDS = 4.0
