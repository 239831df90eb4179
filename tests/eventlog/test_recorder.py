"""The recorder: rotation, snapshots, the ring, failures that never reach the control loop."""

from __future__ import annotations

import errno
import io
import logging
import random
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import anyio
import orjson
import pytest

from adapters.eventlog.recorder import Recorder, RecorderSettings
from app import replay
from catalog_core.config import CatalogConfig
from catalog_core.events import ObjectUpserted, SourceKind
from catalog_core.fold import step
from contracts import eventlog as wire
from tests.eventlog.harness import START, steps
from tests.eventlog.same import differences
from tests.simulation import BusyAppliance, SimulatedShell

CONFIG = CatalogConfig()


def _records(path: Path) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        return [orjson.loads(line) for line in f]


def _verify(path: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = replay.run(str(path), verify=True, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def _appliance(
    tmp_path: Path, seed: int = 3, opener: Callable[[Path], IO[bytes]] | None = None, **settings: Any
) -> tuple[SimulatedShell, BusyAppliance, Recorder]:
    shell = SimulatedShell(CONFIG, now=START, keep_history=True)
    appliance = BusyAppliance(shell, random.Random(seed))
    shell.executor = appliance.execute
    options: dict[str, Any] = {"ring_size": 0} | settings
    writer = options.pop("writer", "inline")
    extra = {"opener": opener} if opener is not None else {}
    recorder = Recorder(
        RecorderSettings(tmp_path / "events.jsonl", **options),
        CONFIG,
        writer=writer,
        clock=lambda: shell.now,
        run_id="recorder-test",
        **extra,
    )
    shell.recorder = recorder
    appliance.start()
    return shell, appliance, recorder


def _run(appliance: BusyAppliance, seconds: int) -> None:
    for _ in range(seconds):
        appliance.second()


def test_rotation_bounds_the_files_and_each_one_replays_on_its_own(tmp_path: Path) -> None:
    shell, appliance, recorder = _appliance(tmp_path, max_bytes=60_000, max_files=3)
    _run(appliance, 900)
    recorder.close()
    assert recorder.stats.rotations >= 3
    assert recorder.stats.records_dropped == 0
    files = [tmp_path / "events.jsonl.2", tmp_path / "events.jsonl.1", tmp_path / "events.jsonl"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in files)
    for path in files:
        records = _records(path)
        longest = max(len(line) for line in path.read_bytes().splitlines(keepends=True))
        assert path.stat().st_size <= 60_000 + longest
        header, opening = records[0], records[1]
        assert header["k"] == "header" and header["starts_run"] is False
        assert opening["k"] == "snapshot" and opening["seq"] == header["seq"] + 1
        code, out, err = _verify(path)
        assert code == 0, out + err
        assert "continues run recorder-test" in err
        code, out, err = _verify(path)  # and --from-snapshot starts from the latest snapshot
        assert replay.run(str(path), from_snapshot=True, out=io.StringIO(), err=io.StringIO()) == 0
    # The retained files, oldest first, are one log: their steps are the live run's last steps.
    joined = tmp_path / "joined.jsonl"
    joined.write_bytes(b"".join(p.read_bytes() for p in files))
    code, out, err = _verify(joined)
    assert code == 0, out + err
    replayed = list(steps(joined))
    assert shell.history is not None
    live = shell.history[-len(replayed) :]
    for item, (event, transition) in zip(replayed, live, strict=True):
        assert differences(item.event, event) == []
        assert differences(item.commands, transition.commands) == []


def test_a_snapshot_every_n_events(tmp_path: Path) -> None:
    _, appliance, recorder = _appliance(tmp_path, snapshot_every=25)
    _run(appliance, 300)
    recorder.close()
    records = _records(tmp_path / "events.jsonl")
    events = [r["seq"] for r in records if r["k"] == "event"]
    snapshots = [r for r in records if r["k"] == "snapshot"]
    assert len(snapshots) == len(events) // 25
    for snap in snapshots:
        assert snap["after"] in events
        assert len([e for e in events if e <= snap["after"]]) % 25 == 0
    assert _verify(tmp_path / "events.jsonl")[0] == 0


def test_an_old_log_is_moved_away_not_appended_to(tmp_path: Path) -> None:
    (tmp_path / "events.jsonl").write_bytes(b"an older run\n")
    _, appliance, recorder = _appliance(tmp_path, max_files=2)
    _run(appliance, 20)
    recorder.close()
    assert (tmp_path / "events.jsonl.1").read_bytes() == b"an older run\n"
    assert _records(tmp_path / "events.jsonl")[0]["starts_run"] is True
    assert recorder.stats.rotations == 0


def test_the_ring_dumps_a_log_that_replays_on_its_own(tmp_path: Path) -> None:
    _shell, appliance, recorder = _appliance(tmp_path, ring_size=40, snapshot_every=10)
    _run(appliance, 200)
    recorder.close()
    dump = io.BytesIO()
    count = recorder.dump_ring(dump)
    path = tmp_path / "ring.jsonl"
    path.write_bytes(dump.getvalue())
    records = _records(path)
    assert count == len(records)
    header, opening = records[0], records[1]
    assert header["origin"] == "ring-dump" and header["starts_run"] is False
    assert opening["k"] == "snapshot"
    # After its preamble, the dump holds exactly the last records of the log, byte for byte.
    logged = (tmp_path / "events.jsonl").read_bytes().splitlines()
    assert path.read_bytes().splitlines()[2:] == logged[-(len(records) - 2) :]
    code, out, err = _verify(path)
    assert code == 0, out + err


def test_a_ring_that_still_holds_the_start_dumps_the_whole_run(tmp_path: Path) -> None:
    _, appliance, recorder = _appliance(tmp_path, ring_size=100_000)
    _run(appliance, 30)
    recorder.close()
    path = tmp_path / "ring.jsonl"
    with open(path, "wb") as f:
        recorder.dump_ring(f)
    first = _records(path)[0]
    assert first["origin"] == "ring-dump" and first["starts_run"] is True and first["seq"] == 0
    logged = (tmp_path / "events.jsonl").read_bytes().splitlines()
    assert path.read_bytes().splitlines()[1:] == logged[1:]
    assert _verify(path)[0] == 0


class FlakyDisk:
    """Files that fail like a full disk while ``full``: half the bytes get written, then ENOSPC."""

    def __init__(self) -> None:
        self.full = False
        self.failures = 0

    def __call__(self, path: Path) -> IO[bytes]:
        disk = self
        real = open(path, "ab")  # noqa: SIM115 - closed by the recorder through the wrapper

        class File(io.RawIOBase):
            def write(self, data: Any) -> int:
                if disk.full:
                    disk.failures += 1
                    real.write(bytes(data)[: len(data) // 2])
                    real.flush()
                    raise OSError(errno.ENOSPC, "No space left on device")
                return real.write(data)

            def flush(self) -> None:
                real.flush()

            def tell(self) -> int:
                return real.tell()

            def seek(self, offset: int, whence: int = 0) -> int:
                return real.seek(offset, whence)

            def truncate(self, size: int | None = None) -> int:
                return real.truncate(size)

            def close(self) -> None:
                real.close()

        return File()  # type: ignore[return-value]


def test_a_full_disk_drops_and_counts_logs_once_each_way_then_resynchronises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    disk = FlakyDisk()
    shell, appliance, recorder = _appliance(tmp_path, opener=disk, retry_seconds=5.0)
    caplog.set_level(logging.WARNING, logger="model_catalog.eventlog")
    for _ in range(60):
        appliance.second()
        recorder.flush()
    disk.full = True
    for _ in range(60):
        appliance.second()
        recorder.flush()  # the shell's loop goes on; nothing reaches it
    assert recorder.stats.failing
    assert disk.failures >= 5  # retried every 5 s, each time in vain
    disk.full = False
    for _ in range(60):
        appliance.second()
        recorder.flush()
    recorder.close()
    stats = recorder.stats
    assert not stats.failing
    assert stats.write_errors == disk.failures
    assert stats.records_dropped > 0
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    recoveries = [
        r for r in caplog.records if r.levelno == logging.WARNING and "works again" in r.getMessage()
    ]
    assert len(errors) == 1 and "No space left on device" in errors[0].getMessage()
    assert len(recoveries) == 1
    records = _records(tmp_path / "events.jsonl")  # no torn line: the tail was cut off before the gap
    gaps = [i for i, r in enumerate(records) if r["k"] == "gap"]
    assert len(gaps) == 1
    gap = records[gaps[0]]
    assert records[gaps[0] - 1]["seq"] == gap["lost_from"] - 1
    assert records[gaps[0] + 1]["k"] == "snapshot" and records[gaps[0] + 1]["seq"] == gap["lost_to"] + 1
    code, out, err = _verify(tmp_path / "events.jsonl")
    assert code == 0, out + err
    assert f"records {gap['lost_from']}..{gap['lost_to']} were never written (writing the file failed)" in err
    after_gap = [s for s in steps(tmp_path / "events.jsonl") if s.seq > gap["seq"]]
    assert shell.history is not None
    for item, (event, transition) in zip(after_gap, shell.history[-len(after_gap) :], strict=True):
        assert differences(item.event, event) == []
        assert differences(item.commands, transition.commands) == []


def test_an_unwritable_path_never_reaches_the_loop_and_recovers_in_a_fresh_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "logs"
    blocker.write_text("a file where the directory should be")
    shell = SimulatedShell(CONFIG, now=START)
    appliance = BusyAppliance(shell, random.Random(5))
    shell.executor = appliance.execute
    settings = RecorderSettings(blocker / "events.jsonl", ring_size=0, retry_seconds=5.0)
    recorder = Recorder(settings, CONFIG, writer="inline", clock=lambda: shell.now, run_id="blocked")
    shell.recorder = recorder
    caplog.set_level(logging.WARNING, logger="model_catalog.eventlog")
    appliance.start()
    for _ in range(30):
        appliance.second()
        recorder.flush()
    assert recorder.stats.failing and recorder.stats.records_dropped > 0
    blocker.unlink()
    for _ in range(30):
        appliance.second()
        recorder.flush()
    recorder.close()
    assert not recorder.stats.failing
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1
    records = _records(blocker / "events.jsonl")
    assert records[0]["k"] == "header" and records[0]["starts_run"] is False
    assert records[1]["k"] == "snapshot"
    code, out, err = _verify(blocker / "events.jsonl")
    assert code == 0, out + err


def test_a_device_is_never_rotated_or_truncated(tmp_path: Path) -> None:
    settings = RecorderSettings(Path("/dev/null"), ring_size=0)
    shell = SimulatedShell(CONFIG, now=START)
    recorder = Recorder(settings, CONFIG, writer="inline", clock=lambda: shell.now)
    shell.recorder = recorder
    shell.tick()
    recorder.close()
    assert recorder.stats.failing and recorder.stats.write_errors == 1
    assert Path("/dev/null").exists() and not Path("/dev/null.1").exists()


def test_a_writer_that_falls_behind_drops_then_resynchronises(tmp_path: Path) -> None:
    _shell, appliance, recorder = _appliance(tmp_path, writer="thread", queue_bytes=64 * 1024)
    _run(appliance, 200)  # nothing writes: the queue fills up and the rest is dropped
    assert recorder.stats.records_dropped > 0
    recorder.flush()  # the writer catches up...
    _run(appliance, 50)  # ...and the next step first queues a gap and a snapshot
    recorder.close()
    records = _records(tmp_path / "events.jsonl")
    gap = next(r for r in records if r["k"] == "gap")
    assert gap["reason"] == "the writer fell behind"
    code, out, err = _verify(tmp_path / "events.jsonl")
    assert code == 0, out + err


def test_the_thread_writer_keeps_the_loop_free(tmp_path: Path) -> None:
    async def main() -> Recorder:
        _shell, appliance, recorder = _appliance(tmp_path, writer="thread", ring_size=0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(recorder.run)
            for _ in range(300):
                appliance.second()
                await anyio.sleep(0)
            tg.cancel_scope.cancel()
        await recorder.aclose()
        path = tmp_path / "ring.jsonl"
        assert await recorder.dump_ring_to(path) == 0  # the ring is off here
        return recorder

    recorder = anyio.run(main)
    assert recorder.stats.records_dropped == 0
    assert recorder.stats.records_written == recorder.last_seq + 1
    assert _verify(tmp_path / "events.jsonl")[0] == 0


def test_an_event_that_cannot_be_encoded_is_dropped_not_raised(tmp_path: Path) -> None:
    shell, appliance, recorder = _appliance(tmp_path)
    _run(appliance, 20)
    odd = ObjectUpserted(SourceKind.PODS, {"metadata": {"name": "p", "labels": {"t": datetime.now(UTC)}}})
    recorder.record(odd, step(shell.state, odd))  # a datetime is not JSON: it would come back as a string
    shell.state = step(shell.state, odd).state
    _run(appliance, 20)
    recorder.close()
    assert recorder.stats.encode_errors == 1
    code, out, err = _verify(tmp_path / "events.jsonl")
    assert code == 0, out + err
    assert "were never written" in err


def test_starting_from_a_restored_state_opens_with_a_snapshot(tmp_path: Path) -> None:
    shell, appliance, recorder = _appliance(tmp_path / "first")
    _run(appliance, 30)
    recorder.close()
    second = Recorder(
        RecorderSettings(tmp_path / "second.jsonl", ring_size=0),
        CONFIG,
        writer="inline",
        state=shell.state,
        clock=lambda: shell.now,
    )
    shell.recorder = second
    _run(appliance, 30)
    second.close()
    records = _records(tmp_path / "second.jsonl")
    assert records[0]["starts_run"] is False and records[1]["k"] == "snapshot"
    assert _verify(tmp_path / "second.jsonl")[0] == 0


def test_settings_from_the_environment() -> None:
    assert RecorderSettings.from_env({}) is None
    assert RecorderSettings.from_env({"CATALOG_EVENT_LOG_PATH": "  "}) is None
    settings = RecorderSettings.from_env(
        {
            "CATALOG_EVENT_LOG_PATH": "/var/log/catalog/events.jsonl",
            "CATALOG_EVENT_LOG_MAX_BYTES": "1048576",
            "CATALOG_EVENT_LOG_FILES": "8",
        }
    )
    assert settings == RecorderSettings(Path("/var/log/catalog/events.jsonl"), max_bytes=1048576, max_files=8)
    with pytest.raises(
        ValueError, match="CATALOG_EVENT_LOG_MAX_BYTES: must be an integer >= 65536, got '4M'"
    ):
        RecorderSettings.from_env({"CATALOG_EVENT_LOG_PATH": "x", "CATALOG_EVENT_LOG_MAX_BYTES": "4M"})


def test_a_configuration_with_credentials_is_not_recorded(tmp_path: Path) -> None:
    # CatalogConfig.from_env already refuses such a URL; the recorder guards on its own for embedders
    # that build a CatalogConfig themselves.
    assert not isinstance(
        CatalogConfig.from_env({"LITELLM_BASE_URL": "http://admin:s3cret@litellm.ai:4000"}), CatalogConfig
    )
    config = CatalogConfig(litellm_base_url="http://admin:s3cret@litellm.ai:4000")
    with pytest.raises(wire.UnsafeConfigError, match="LITELLM_BASE_URL carries credentials"):
        Recorder(RecorderSettings(tmp_path / "events.jsonl"), config)
    assert not (tmp_path / "events.jsonl").exists()


def _big_pods(recorder: Recorder, shell_state: Any, count: int, size: int, first: int = 0) -> Any:
    """Record ``count`` upserts of a pod carrying ``size`` bytes of padding; returns the state after."""
    state = shell_state
    for i in range(first, first + count):
        # padding in a field the event log keeps of a Pod (its labels; spec is trimmed away)
        pod = ObjectUpserted(SourceKind.PODS, {"metadata": {"name": f"p{i}", "labels": {"pad": "x" * size}}})
        transition = step(state, pod)
        recorder.record(pod, transition)
        state = transition.state
    return state


def test_the_ring_is_bounded_by_bytes_and_keeps_the_newest(tmp_path: Path) -> None:
    """Regression (issue 12): 60 edits of an 875 KB models.json reached 269 MiB RSS — the ring was
    bounded by count alone and kept every version."""
    cap = 256 * 1024
    shell, appliance, recorder = _appliance(tmp_path, ring_size=1000, ring_bytes=cap)
    _run(appliance, 5)
    _big_pods(recorder, shell.state, 60, 50_000)
    ring = recorder.ring()
    sizes = [len(item.data) for item in ring if item.data is not None]
    assert recorder.ring_bytes <= cap and sum(sizes) <= cap
    assert 3 <= len(ring) < 10  # about cap / 50 KB of them: the count cap (1000) did not bind
    assert ring[-1].last_seq == recorder.last_seq and b'"p59"' in (ring[-1].data or b"")
    recorder.close()
    path = tmp_path / "ring.jsonl"
    with open(path, "wb") as f:
        recorder.dump_ring(f)
    code, out, err = _verify(path)
    assert code == 0, out + err


def test_a_record_larger_than_the_ring_byte_cap_is_kept_alone(tmp_path: Path) -> None:
    cap = 64 * 1024
    shell, appliance, recorder = _appliance(tmp_path, ring_size=1000, ring_bytes=cap)
    _run(appliance, 5)
    state = _big_pods(recorder, shell.state, 3, 10_000)
    _big_pods(recorder, state, 1, 200_000, first=3)
    [only] = recorder.ring()
    assert only.last_seq == recorder.last_seq and b'"p3"' in (only.data or b"")
    assert recorder.ring_bytes == len(only.data or b"") > cap


def test_the_ring_byte_cap_is_a_setting() -> None:
    env = {"CATALOG_EVENT_LOG_PATH": "/tmp/x.jsonl"}
    default = RecorderSettings.from_env(env)
    assert default is not None and default.ring_bytes == 8 * 1024 * 1024
    chosen = RecorderSettings.from_env(env | {"CATALOG_EVENT_LOG_RING_BYTES": "1048576"})
    assert chosen is not None and chosen.ring_bytes == 1048576
    with pytest.raises(ValueError, match="CATALOG_EVENT_LOG_RING_BYTES"):
        RecorderSettings.from_env(env | {"CATALOG_EVENT_LOG_RING_BYTES": "1000"})
