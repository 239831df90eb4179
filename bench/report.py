"""results.json -> results.md: the table of targets, the growth table, the profile, the context."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

from bench.stats import summary

# Issue 15's targets for P5 (issue 7 asked for 50,000 events/s and a ratio of 1.5).
P5_EVENTS_PER_S = 100_000
P5_COST_RATIO = 1.2


def _ms(v: float | None) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v * 1000:,.1f} ms"


def _s(v: float | None, digits: int = 2) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.{digits}f} s"


def _spread(s: dict[str, Any] | None, fmt: Any) -> str:
    if not s or not s.get("n"):
        return "n/a"
    return f"{fmt(s['median'])} (min {fmt(s['min'])}, max {fmt(s['max'])}, n={s['n']})"


def _met(ok: bool | None) -> str:
    return "n/a" if ok is None else ("**met**" if ok else "**missed**")


def p1_latency(v: dict[str, Any]) -> dict[str, Any]:
    """P1's figure: from the watch event reaching the controller (older results: from the API write)."""
    measured: dict[str, Any] | None = v.get("event_to_request_s")
    whole: dict[str, Any] = v["latency_s"]
    return measured if measured and measured.get("n") else whole


def rows(r: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    out: list[tuple[str, str, str, str, str]] = []
    errors = r.get("errors", {})

    # P1
    p1 = {k: v for k, v in (r.get("P1") or {}).items() if v}
    stress = {k: v for k, v in (r.get("P1_stress") or {}).items() if v}
    for head in sorted(p1, key=int):
        v = p1[head]
        lat = p1_latency(v)
        whole = v["latency_s"]
        # a change with no request, or a figure below zero (clocks that disagree), is never a pass
        ok = v["missing"] == 0 and lat["min"] >= 0 and lat["p50"] <= 0.020 and lat["p99"] <= 0.100
        fast = stress.get(head)
        extra = (
            f"; at 50 changes/s (stress): p50 {_ms(p1_latency(fast)['p50'])}, p99 "
            f"{_ms(p1_latency(fast)['p99'])}"
            if fast
            else ""
        )
        out.append(
            (
                "P1",
                f"watch event received -> LiteLLM request ({int(head):,} models; {lat['n']} readiness "
                f"changes of different models, {1 / v['interval_s']:.0f}/s; real kube-apiserver, fake "
                "LiteLLM in its own process)",
                "p50 <= 20 ms, p99 <= 100 ms",
                f"p50 {_ms(lat['p50'])}, p90 {_ms(lat['p90'])}, p99 {_ms(lat['p99'])}, max {_ms(lat['max'])}"
                f" (missing {v['missing']}; p99/target {lat['p99'] / 0.1:.2f}); from the API write, the "
                f"API server's delivery included: p50 {_ms(whole['p50'])}, p99 {_ms(whole['p99'])}{extra}",
                _met(ok),
            )
        )
    for key in [k for k in errors if k.startswith("P1@")]:
        out.append(
            (
                "P1",
                f"watch event -> LiteLLM request ({key})",
                "p50 <= 20 ms, p99 <= 100 ms",
                errors[key],
                "error",
            )
        )

    # P2
    p2 = r.get("P2")
    if p2:
        both = p2["both_s"]
        out.append(
            (
                "P2",
                "Kubernetes change -> LiteLLM row and ConfigMap both visible (real peers, "
                f"{p2['models']} models, "
                f"{both['n']} changes one at a time, polled every 20 ms)",
                "p99 <= 1 s",
                f"p50 {_ms(both['p50'])}, p99 {_ms(both['p99'])}, max {_ms(both['max'])} (row alone p99 "
                f"{_ms(p2['row_s']['p99'])}, ConfigMap alone p99 {_ms(p2['configmap_s']['p99'])}; publishing "
                f"(row created) p50 {_ms(p2['both_create_s']['p50'])} p99 {_ms(p2['both_create_s']['p99'])}, "
                f"withdrawing (row deleted) p50 {_ms(p2['both_delete_s']['p50'])} p99 "
                f"{_ms(p2['both_delete_s']['p99'])})",
                _met(both["p99"] <= 1.0),
            )
        )
    elif "P2" in errors:
        out.append(
            ("P2", "change -> row and ConfigMap visible (real peers)", "p99 <= 1 s", errors["P2"], "error")
        )

    # P3
    p3 = r.get("P3")
    if p3:
        total = p3["total_writes"]
        out.append(
            (
                "P3",
                f"writes while idle for {p3['seconds']:.0f} s at {p3['models']} models "
                f"({p3['litellm_resyncs']} "
                f"LiteLLM resyncs, {p3['kube_relists']:.0f} watch relists)",
                "0",
                f"{total:.0f} writes (LiteLLM at the fake {p3['litellm_writes_at_fake']}, by kind "
                f"{p3['controller_writes_by_kind'] or '{}'}, resourceVersions changed: "
                f"{', '.join(p3['resource_versions_changed']) or 'none'})",
                _met(total == 0 and not p3["resource_versions_changed"]),
            )
        )
    elif "P3" in errors:
        out.append(("P3", "writes while idle", "0", errors["P3"], "error"))

    # P4
    p4 = r.get("P4")
    if p4 and p4["runs"]:
        runs = p4["runs"]
        lw = summary([x["litellm_writes"] for x in runs])
        cw = summary([x["configmap_writes"] for x in runs])
        unchanged = summary([x["litellm_writes_unchanged_models"] for x in runs])
        secs = summary([x["flap_seconds"] for x in runs])
        changed = runs[0]["models_changed"]
        limit = changed + changed // 10  # 1 per changed model plus 10% slack (issue 14)
        rolls = summary([x.get("rollouts", 0.0) for x in runs])
        patches = summary([x.get("agent_template_patches", 0.0) for x in runs])
        ok = all(
            x["litellm_writes"] <= limit
            and x["litellm_writes_unchanged_models"] == 0
            and x["configmap_writes"] <= 3
            and x.get("rollouts", 0.0) <= x.get("consumers", 1)
            for x in runs
        )
        correct = all(x["final_rows_correct"] and x["final_catalog_correct"] for x in runs)
        out.append(
            (
                "P4",
                f"1,000 readiness patches over 100 models (sent in {_spread(secs, lambda v: f'{v:.2f} s')}), "
                f"then quiet; {changed} models end changed; real kube-apiserver and real LiteLLM; "
                "one consumer Deployment and one AgentTemplate",
                f"<= {limit} LiteLLM writes (1 per changed model + 10%), 0 on models that end where they "
                "began; <= 3 ConfigMap writes; <= 1 rollout per consumer",
                f"LiteLLM writes {_spread(lw, lambda v: f'{v:.0f}')} (of them on models whose final "
                "state did "
                f"not change: {_spread(unchanged, lambda v: f'{v:.0f}')}); ConfigMap writes "
                f"{_spread(cw, lambda v: f'{v:.0f}')}; rollouts {_spread(rolls, lambda v: f'{v:.0f}')}; "
                f"AgentTemplate patches {_spread(patches, lambda v: f'{v:.0f}')}; "
                f"final state correct: {correct}",
                _met(ok and correct),
            )
        )
    elif "P4" in errors:
        out.append(
            (
                "P4",
                "readiness flaps",
                "<= 1 write per changed model; <= 3 ConfigMap writes",
                errors["P4"],
                "error",
            )
        )

    # P5
    p5 = r.get("P5")
    if p5:
        sizes = p5["sizes"]
        small, large = ("1000", "10000") if "10000" in sizes else ("100", "1000")
        t_small, t_large = sizes[small]["events_per_s"], sizes[large]["events_per_s"]
        ratio = t_small["median"] / t_large["median"]
        ok = min(t_small["median"], t_large["median"]) >= P5_EVENTS_PER_S and ratio <= P5_COST_RATIO
        out.append(
            (
                "P5",
                f"parse+fold throughput ({p5['events']} watch events, {p5['repeats']} runs; the heap frozen "
                "after the steady state, as `model-catalog run` keeps it)",
                f">= {P5_EVENTS_PER_S:,} events/s; cost ratio {large}/{small} <= {P5_COST_RATIO}",
                f"{small}: {_spread(t_small, lambda v: f'{v:,.0f}/s')}; {large}: "
                f"{_spread(t_large, lambda v: f'{v:,.0f}/s')}; cost ratio {ratio:.2f}",
                _met(ok),
            )
        )
    # P6: the command with its defaults (one part per usable CPU) is judged; the one-CPU figure beside it
    p6 = r.get("P6")
    if p6:
        wall = p6["wall_s"]
        scale = 1_000_000 / p6["records"]
        first = max(x["rss_first_half_mib"] for x in p6["runs"])
        second = max(x["rss_second_half_mib"] for x in p6["runs"])
        flat = second <= first * 1.1 + 2

        def scaled(median: float) -> str:
            if scale == 1:
                return ""
            return f" (a {p6['records']:,}-record log; x{scale:.0f} = {median * scale:.1f} s)"

        processes = max(x.get("processes", 1) for x in p6["runs"])
        out.append(
            (
                "P6",
                f"`model-catalog replay --verify` of a {p6['records']:,}-record log "
                f"({p6['log_bytes'] / 1e6:.0f} MB), its defaults (`--jobs auto`) on this "
                f"{p6.get('cpus', '?')}-CPU machine",
                "<= 10 s, memory flat per process",
                f"{_spread(wall, _s)}{scaled(wall['median'])}, {processes} processes; RSS max per process "
                f"{first:.0f} MiB in its first half, {second:.0f} MiB in its second; the event-log layer "
                f"alone {p6['log_layer_s']:.1f} s",
                _met(wall["median"] * scale <= 10.0 and flat),
            )
        )
        one = p6.get("one_cpu")
        if one:
            one_first = max(x["rss_first_half_mib"] for x in one["runs"])
            one_second = max(x["rss_second_half_mib"] for x in one["runs"])
            out.append(
                (
                    "P6 (one CPU)",
                    "the same, `--jobs 1` pinned to one CPU (the fold's own cost)",
                    "(reported beside P6)",
                    f"{_spread(one['wall_s'], _s)}{scaled(one['wall_s']['median'])}; RSS max "
                    f"{one_first:.0f} MiB in the first half, {one_second:.0f} MiB in the second",
                    "",
                )
            )
    # P7: <= 48 MiB at 100 models (issue 35), <= 100 MiB at 1,000, <= 20 KiB per model between sizes
    p7 = {k: v for k, v in (r.get("P7") or {}).items() if v}
    targets = {"100": 48.0, "1000": 100.0}
    for n in sorted(p7, key=int):
        v = p7[n]
        limit = targets.get(n)
        out.append(
            (
                "P7",
                f"resident memory of `model-catalog run`, steady at {int(n):,} models (as the image runs it: "
                "its console script in a venv of requirements.lock alone, -OO bytecode, the image's "
                "environment)",
                f"<= {limit:.0f} MiB" if limit else "(no target at this size)",
                f"{_spread(v['rss_mib'], lambda x: f'{x:.1f} MiB')}; peak {v['peak_rss_mib']:.1f} MiB",
                _met(v["rss_mib"]["median"] <= limit) if limit else "reported",
            )
        )
    if len(p7) >= 2:
        sizes = sorted(p7, key=int)
        small, large = sizes[0], sizes[-1]
        slope = (
            (p7[large]["rss_mib"]["median"] - p7[small]["rss_mib"]["median"])
            * 1024
            / (int(large) - int(small))
        )
        measured = ", ".join(f"{int(n):,}" for n in sizes)
        out.append(
            (
                "P7",
                f"marginal memory per model, slope between {int(small):,} and {int(large):,} models "
                f"(measured at {measured})",
                "<= 20 KiB per model (slope over 100, 1,000 and 10,000)",
                f"{slope:.1f} KiB per model",
                _met(slope <= 20) if len(sizes) >= 3 else f"{_met(slope <= 20)} (two sizes only)",
            )
        )
    # P8
    p8 = r.get("P8")
    if p8:
        first, warm = p8_split(p8["runs"])
        first_cat = summary([x["catalog"] for x in first])
        cat = summary([x["catalog"] for x in warm])
        health = summary([x["healthz"] for x in warm])
        imports = p8["imports"]
        import_s = imports["with_imports_s"]["median"] - imports["bare_interpreter_s"]["median"]
        out.append(
            (
                "P8",
                f"process start -> first catalog written, API reachable ({len(warm)} restarts and "
                f"{len(first)} first starts at 100 models)",
                "<= 1.0 s (imports reported apart; every restart, and the first starts' median)",
                f"catalog written {_spread(cat, _s)}; /healthz answers {_spread(health, _s)}; first start "
                f"(empty LiteLLM, {first[0]['rows']:.0f} rows to create) {_spread(first_cat, _s)}; imports "
                f"{_s(import_s)} of it",
                _met(max(x["catalog"] for x in warm) <= 1.0 and first_cat["median"] <= 1.0),
            )
        )
    out.extend(idle_rows(r))
    out.extend(soak_rows(r))
    return out


def _per_min(rates: dict[str, float]) -> str:
    order = ["WATCH", "GET", "LIST", "PUT", "POST", "PATCH", "DELETE"]
    verbs = sorted(rates, key=lambda v: order.index(v) if v in order else len(order))
    return ", ".join(f"{v} {rates[v]:.1f}" for v in verbs if rates[v]) or "none"


def _plus(*parts: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in parts:
        for verb, rate in part.items():
            out[verb] = out.get(verb, 0.0) + rate
    return out


def idle_rows(r: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """Issue 35: idle API server requests per minute by verb and RSS, next to the previous controller's."""
    v = r.get("IDLE")
    if not v:
        error = (r.get("errors") or {}).get("IDLE")
        return [("IDLE", "idle API server requests per minute and RSS", "", error, "error")] if error else []
    prev = v["previous"]
    prev_verbs: dict[str, float] = prev["requests_per_min"]
    prev_text = f"{prev['total_per_min']} ({_per_min(prev_verbs)}; quoted from the issue, not re-measured)"
    out: list[tuple[str, str, str, str, str]] = []
    single = v["configs"]["single"]
    ours = single["per_min"].get("model-catalog", {})
    own = single["per_min"].get("kube-apiserver", {})
    total = _plus(ours, own)
    long_run = v.get("long_run")
    judged = [total] + ([_plus(long_run, own)] if long_run else [])
    # The target is the load: requests a minute, every verb together. A verb above the previous
    # controller's own figure is said, not hidden.
    ok = all(sum(t.values()) <= prev["total_per_min"] for t in judged)
    above = sorted({verb for t in judged for verb, rate in t.items() if rate > prev_verbs.get(verb, 0.0)})
    long_text = (
        f"; over a long run (renewals every 7.5 min on average, not once in the window): "
        f"{sum(_plus(long_run, own).values()):.1f} ({_per_min(_plus(long_run, own))})"
        if long_run
        else "; the window is shorter than a watch's life (5-10 min): no renewal in it"
    )
    out.append(
        (
            "IDLE",
            f"API server requests per minute while nothing changes, the API server's own included: one "
            f"replica without leader election, as the previous controller ran ({v['models']} ready KubeAI "
            f"Models + {v['trials']} external models keyed by Secrets, {single['seconds']:.0f} s; audit log "
            "of a kube-apiserver v1.20.2 of its own)",
            f"<= the previous controller's {prev_text}",
            f"{sum(total.values()):.1f} ({_per_min(total)}): the controller {_per_min(ours)}, the API "
            f"server's own {_per_min(own)}{long_text}"
            + (f"; above the previous controller's figure for {', '.join(above)}" if above else "")
            + "; this controller before: "
            f"{prev['this_controller_before_total_per_min']} "
            f"({_per_min(prev['this_controller_before_per_min'])}, quoted)",
            _met(ok),
        )
    )
    for key, what in (
        (
            "leader",
            "one replica with leader election (the Lease renewed every "
            f"{v.get('lease_retry_period_s', 2):g} s)",
        ),
        ("standby", "the leader and a standby, as deploy/ runs them"),
    ):
        c = v["configs"].get(key)
        if not c:
            continue
        c_ours = c["per_min"].get("model-catalog", {})
        c_own = c["per_min"].get("kube-apiserver", {})
        window = sum(_plus(c_ours, c_own).values())
        if key == "leader":
            # A window of two minutes holds no watch renewal (5-10 minutes each): over a long run the
            # leader adds the single replica's renewals and relists, less the single's probe of the Lease
            # (the leader's own Lease watch is a long one).
            totals = [window]
            long_text = ""
            if long_run:
                probe = single["ours_by_resource"].get("WATCH leases", 0) / single["minutes"]
                renewals = max(0.0, long_run.get("WATCH", 0.0) - probe) + long_run.get("LIST", 0.0)
                totals.append(window + renewals)
                long_text = (
                    f"; over a long run, with the watches' renewals and relists: {window + renewals:.1f}"
                )
            target = f"<= the previous controller's {prev['total_per_min']} (it took no Lease)"
            result = _met(all(t <= prev["total_per_min"] for t in totals))
        else:
            long_text, target, result = "", "reported (the previous controller took no Lease)", "reported"
        out.append(
            (
                "IDLE",
                f"the same, {what} ({c['seconds']:.0f} s)",
                target,
                f"{window:.1f} ({_per_min(_plus(c_ours, c_own))}): the "
                f"controller{'s' if key == 'standby' else ''} {_per_min(c_ours)}, the API server's own "
                f"{_per_min(c_own)}{long_text}",
                result,
            )
        )
    rss = single["rss_mib"]
    (series,) = rss.values()
    out.append(
        (
            "IDLE",
            f"RSS of the process while idle ({v['models']} models + {v['trials']} external, as the image "
            "runs it)",
            f"<= {v['rss_target_mib']:.0f} MiB (the previous controller: {prev['rss_mib']:.0f} MiB, quoted)",
            _spread(series, lambda x: f"{x:.1f} MiB"),
            _met(series["median"] <= v["rss_target_mib"]),
        )
    )
    return out


SOAK_FIGURES: dict[str, tuple[str, Callable[[float], str]]] = {
    "rss_mib": ("RSS", lambda x: f"{x:.1f} MiB"),
    "open_fds": ("open file descriptors", lambda x: f"{x:.0f}"),
    "tasks": ("event-loop tasks", lambda x: f"{x:.0f}"),
    "metric_series": ("metric series", lambda x: f"{x:.0f}"),
}


def soak_rows(r: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """Issue 35's soak: flat figures after warm-up, and the fault suite's invariants at the end."""
    v = r.get("SOAK")
    if not v:
        error = (r.get("errors") or {}).get("SOAK")
        return [("SOAK", "churn on the real peers", "", error, "error")] if error else []
    within = v["flat_within"] * 100
    restarts = "; ".join(
        f"{what} restarted at {e['at_s']:.0f} s "
        + (
            f"(stop {e['stop_s']:.1f} s, start {e['start_s']:.1f} s)"
            if "error" not in e
            else f"({e['error']})"
        )
        for what, e in (
            ("LiteLLM", v["events"].get("litellm_restart")),
            ("the API server", v["events"].get("apiserver_restart")),
        )
        if e
    )
    what = (
        f"{v['minutes']:g} min of churn on the real peers ({v['changes_per_s']:.1f} changes/s made: "
        f"{v['changes']}; {restarts}; {len(v['samples'])} samples, every 5 s)"
    )
    out: list[tuple[str, str, str, str, str]] = []
    after = _after_restarts(v)
    for key, (name, fmt) in SOAK_FIGURES.items():
        f = v["flat"][key]
        since = ""
        if after:
            a, b = (statistics.median(s[key] for s in half) for half in after)
            since = (
                f"; after the restarts (from {after[0][0]['t']:.0f} s), first half -> second half: "
                f"{fmt(a)} -> {fmt(b)} ({(b - a) / a * 100 if a else float('nan'):+.1f} %)"
            )
        out.append(
            (
                "SOAK",
                f"{name}: {what}" if key == "rss_mib" else f"the same, {name}",
                f"flat after warm-up: the last third's median within {within:.0f} % of the second third's",
                f"{fmt(f['second_third_median'])} -> {fmt(f['last_third_median'])} "
                f"({f['change'] * 100:+.1f} %; min {fmt(f['min'])}, max {fmt(f['max'])}){since}",
                _met(bool(f["flat"])),
            )
        )
    broken = {k: x for k, x in v["invariants"].items() if x != "ok"}
    out.append(
        (
            "SOAK",
            "every invariant of the fault suite at the end (converged to render's output, foreign rows "
            "untouched, no duplicates, rollouts justified, alive and /healthz ok throughout, no secret "
            "anywhere, a final change propagates)",
            "all kept",
            (
                f"{len(v['invariants']) - len(broken)} of {len(v['invariants'])} kept"
                + (f"; broken: {broken}" if broken else "")
                + (f"; error: {v['error']}" if v.get("error") else "")
                + f"; final change published in {v.get('final_change_s')} s; "
                f"{v['watchdog_checks']} /healthz checks"
            ),
            _met(not broken and not v.get("error")),
        )
    )
    return out


def _after_restarts(v: dict[str, Any]) -> tuple[list[dict[str, float]], list[dict[str, float]]] | None:
    """The samples taken once both restarts were over, in two halves (None: too few)."""
    ends = [
        e["at_s"] + e.get("stop_s", 0.0) + e.get("start_s", 0.0)
        for e in (v["events"].get("litellm_restart"), v["events"].get("apiserver_restart"))
        if e
    ]
    later = [s for s in v["samples"] if s["t"] >= max(ends, default=0.0) + 10.0]
    half = len(later) // 2
    return (later[:half], later[half:]) if half >= 3 else None


def p8_split(runs: list[dict[str, float]]) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """P8's first starts (an empty LiteLLM) and restarts. A result without "first" marks had one first
    start, the first run."""
    if not any("first" in x for x in runs):
        return runs[:1], runs[1:] or runs
    first = [x for x in runs if x.get("first")]
    warm = [x for x in runs if not x.get("first")]
    return first or runs[:1], warm or runs


def growth(r: dict[str, Any]) -> list[str]:
    p1 = r.get("P1") or {}
    stress = r.get("P1_stress") or {}
    p5 = (r.get("P5") or {}).get("sizes", {})
    p7 = r.get("P7") or {}
    sizes = sorted({int(k) for k in (*p1, *p5, *p7)})
    if not sizes:
        return []
    lines = [
        "| models | P1 p50 / p99 at 10 changes/s | P1 stages p50 (API server / stream wait / fold+plan / "
        "queue+request) "
        "| P1 p50 / p99 at 50 changes/s | P5 events/s | P5 render | P7 RSS (median) | P7 converge |",
        "|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        a = p1.get(str(n)) or {}
        f = stress.get(str(n)) or {}
        b = p5.get(str(n)) or {}
        c = p7.get(str(n)) or {}
        stages = a.get("stages_s") or {}
        cells = [
            f"{n:,}",
            f"{_ms(p1_latency(a)['p50'])} / {_ms(p1_latency(a)['p99'])}" if a else "n/a",
            " / ".join(
                _ms(stages[k]["p50"]) if k in stages else "n/a" for k in ("api", "stream", "plan", "execute")
            )
            if stages
            else "n/a",
            f"{_ms(p1_latency(f)['p50'])} / {_ms(p1_latency(f)['p99'])}" if f else "n/a",
            f"{b['events_per_s']['median']:,.0f}" if b else "n/a",
            f"{b['render_ms']['median']:.1f} ms" if b else "n/a",
            f"{c['rss_mib']['median']:.1f} MiB" if c else "n/a",
            f"{c['converge_s']:.1f} s" if c else "n/a",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(r: dict[str, Any]) -> str:
    m = r.get("machine", {})
    lines = [
        "# model-catalog benchmarks (issue 7)" + (" — quick run" if r.get("quick") else ""),
        "",
        f"Measured {m.get('date', '?')} on {m.get('cpu', '?')}, {m.get('cores', '?')} cores, "
        f"{m.get('ram_gib', '?')} GiB RAM, kernel {m.get('kernel', '?')}; Python {m.get('python', '?')}; "
        f"git {m.get('git_revision', '?')} ({m.get('git_branch', '?')}). Load average at start "
        f"{_load(m.get('load_average_at_start'))}, at end {_load(m.get('load_average_at_end'))} "
        "(a shared 2-core machine: read medians and ratios, not single figures). "
        f"The whole run took {r.get('seconds', 0) / 60:.1f} min.",
        "",
        "Libraries: " + ", ".join(f"{k} {v}" for k, v in (m.get("libraries") or {}).items()) + ".",
        "",
        "| id | what | target | measured: median (spread) | result |",
        "|---|---|---|---|---|",
    ]
    for row in rows(r):
        lines.append("| " + " | ".join(str(x).replace("|", "/") for x in row) + " |")
    g = growth(r)
    if g:
        lines += ["", "## Growth with the number of models", "", *g]
    for prof in r.get("profiles") or []:
        title = (
            "Profile of the worst CPU-bound figure" if prof is (r.get("profiles") or [None])[0] else "Profile"
        )
        lines += [
            "",
            f"## {title}: {prof['figure']} ({prof['ratio']:.2f}x its target)",
            "",
            f"`{prof['command']}` under py-spy ({prof['samples']} samples). Functions by own time:",
            "",
            *[f"{i + 1}. {f} - {pct}%" for i, (f, pct) in enumerate(prof["self"][:10])],
            "",
            "By inclusive time: " + "; ".join(f"{f} {pct}%" for f, pct in prof["inclusive"][:16]) + ".",
        ]
    extra = _details(r)
    if extra:
        lines += ["", "## Details", "", *extra]
    if r.get("errors"):
        lines += ["", "## Errors", "", *[f"- {k}: {v}" for k, v in r["errors"].items()]]
    if r.get("notes"):
        lines += ["", "## Notes", "", *[f"- {n}" for n in r["notes"]]]
    return "\n".join(lines) + "\n"


def _load(v: Any) -> str:
    return "/".join(f"{x:.2f}" for x in v) if v else "?"


def _details(r: dict[str, Any]) -> list[str]:
    out: list[str] = []
    p5 = r.get("P5")
    if p5:
        for n, s in p5["sizes"].items():
            out.append(
                f"- P5 at {int(n):,} models: plan {s['plan_us_per_changed_item']['median']:.0f} us per "
                "changed item "
                f"(burst of 100); render {_spread(s['render_ms'], lambda v: f'{v:.1f} ms')} (first render, "
                f"cache empty: {s['first_render_ms']:.1f} ms)"
                + (
                    f"; parse+fold with the heap not frozen (a host that does not freeze it) "
                    f"{_spread(s['unfrozen_events_per_s'], lambda v: f'{v:,.0f}/s')}."
                    if "unfrozen_events_per_s" in s
                    else "."
                )
            )
    p6 = r.get("P6")
    if p6:
        out.append(
            f"- P6: `{p6['runs'][0]['command'] if p6['runs'] else ''}`: {p6['output']}; cpu (all its "
            f"processes) {_spread(p6['cpu_s'], _s)}, peak RSS of any one process "
            f"{_spread(p6['peak_rss_mib'], lambda v: f'{v:.0f} MiB')}; the parent's RSS over the last run "
            f"(MiB): {p6['runs'][-1]['rss_samples_mib'] if p6['runs'] else []}."
        )
        one = p6.get("one_cpu")
        if one and one["runs"]:
            out.append(
                f"- P6 (one CPU): `{one['runs'][0]['command']}`: cpu {_spread(one['cpu_s'], _s)}, peak RSS "
                f"{_spread(one['peak_rss_mib'], lambda v: f'{v:.0f} MiB')}; RSS over the last run (MiB): "
                f"{one['runs'][-1]['rss_samples_mib']}."
            )
    p1_all = [*(r.get("P1") or {}).items(), *(r.get("P1_stress") or {}).items()]
    for n, v in sorted(p1_all, key=lambda kv: int(kv[0])):
        if v:
            out.append(
                f"- P1 at {int(n):,} models: {v['changes']} changes every {v['interval_s'] * 1000:.0f} ms "
                f"(sent over {v['drive_seconds']:.1f} s); API write round trip p50 "
                f"{_ms(v['api_write_round_trip_s']['p50'])}; "
                + (
                    f"every row written {v['converged_s']:.1f} s after the worker's catalog started, "
                    if v.get("converged_s") is not None
                    else ""
                )
                + f"ready to measure {v['startup_s']:.1f} s after the worker started (settled, heap frozen); "
                f"worker RSS {v['worker_rss_mib'] or 0:.0f} MiB." + _reads_note(v.get("litellm_reads"))
            )
    for n, v in sorted((r.get("P7") or {}).items(), key=lambda kv: int(kv[0])):
        if v:
            out.append(
                f"- P7 at {int(n):,} models: RSS {_spread(v['rss_mib'], lambda x: f'{x:.1f} MiB')}, peak "
                f"{v['peak_rss_mib']:.1f} MiB; converged {v['converge_s']:.1f} s after start; catalog "
                "ConfigMap "
                f"written: {v['catalog_written']} (WriteCatalog outcomes {v['catalog_write_outcomes']})."
            )
    idle = r.get("IDLE")
    if idle:
        for key, c in idle["configs"].items():
            out.append(
                f"- IDLE {key}: the controller's requests in {c['seconds']:.0f} s by verb and resource "
                f"{c['ours_by_resource']}; every client's per minute "
                f"{ {who: _per_min(rates) for who, rates in c['per_min'].items()} }; all requests as the "
                f"audit log saw them {c['audited_per_min']:.1f}/min, as apiserver_request_total counts "
                f"them (a watch once it ends) {c['apiserver_request_total_per_min']:.1f}/min; liveness "
                f"verdicts {c.get('liveness_verdicts', 'n/a')}; RSS "
                + "; ".join(f"{n} {_spread(s, lambda x: f'{x:.1f} MiB')}" for n, s in c["rss_mib"].items())
                + "."
            )
    p3 = r.get("P3")
    if p3:
        out.append(
            f"- P3: controller RSS over the idle period {_spread(p3['rss_mib'], lambda x: f'{x:.1f} MiB')}."
        )
    p4 = r.get("P4")
    if p4:
        for i, run in enumerate(p4["runs"]):
            out.append(f"- P4 run {i + 1}: {run}")
    p8 = r.get("P8")
    if p8:
        imp = p8["imports"]
        out.append(
            "- P8 runs (s from process start): "
            f"{[{k: round(v, 3) for k, v in x.items()} for x in p8['runs']]}; "
            f"empty interpreter {_spread(imp['bare_interpreter_s'], _s)}, with `import app.cli, app.service` "
            f"{_spread(imp['with_imports_s'], _s)}; heaviest imports (ms, cumulative) "
            f"{imp['heaviest_packages_ms']}; RSS right after the imports "
            f"{imp['rss_after_imports_mib']:.1f} MiB (an empty interpreter "
            f"{imp.get('rss_bare_interpreter_mib', 0):.1f} MiB; what each package adds alone, MiB: "
            f"{ {k: round(v, 1) for k, v in (imp.get('rss_added_by_mib') or {}).items()} }); of the RSS, "
            f"{imp.get('rss_dev_venv_only_mib', float('nan')):.1f} MiB are click, rich and pygments, which "
            "httpx imports because the dev venv has them (the image does not)."
        )
    if r.get("load_average"):
        out.append(
            "- Load average (1/5/15 min) before and after each benchmark: "
            + "; ".join(f"{k} {_load(v[0])} -> {_load(v[1])}" for k, v in r["load_average"].items())
            + "."
        )
    if r.get("model_creation_s"):
        out.append(f"- Models created in the API server (seconds per step): {r['model_creation_s']}.")
    return out


def _reads_note(reads: dict[str, Any] | None) -> str:
    """P1's LiteLLM re-reads during the phase, and how many of its slowest 1% waited on one."""
    if not reads or not reads["count"]:
        return ""
    return (
        f" LiteLLM re-reads while driven: {reads['count']} (one every {reads['every_s']:.1f} s); the loop "
        f"parsing the answer p50 {_ms(reads['parse_s']['p50'])} max {_ms(reads['parse_s']['max'])}, folding "
        f"the rows p50 {_ms(reads['fold_s']['p50'])} max {_ms(reads['fold_s']['max'])}; of the "
        f"{reads['slowest']} slowest changes, {reads['slowest_waited_on_a_read']} waited on one."
    )
