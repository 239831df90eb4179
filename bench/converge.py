"""Convergence from an empty LiteLLM (issue 15): the embeddable catalog (bench.latency_worker) on the real
kube-apiserver and the fast LiteLLM fake in a process of its own, from its start to every row written
and nothing queued. Also how long the API server took to create the Models.

    .venv/bin/python -m bench.converge --models 1000 10000 --repeat 3 [--profile DIR]

Uses ``KUBECONFIG`` when set, else starts its own kube-apiserver (``../shared/kube-peer``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import machine
from bench.kube import Kube
from bench.peers import start_kube
from bench.profile import PY_SPY, ensure_py_spy, top_costs
from bench.scenarios import _spawn, _stop
from bench.stats import summary


def converge_once(
    kubeconfig: Path,
    namespace: str,
    appliance_namespace: str,
    models: int,
    *,
    work: Path,
    profile: Path | None,
) -> dict[str, Any]:
    fake = _spawn("bench.fake_server", log=work / f"converge-fake-{models}.log")
    assert fake.stdout is not None
    url = fake.stdout.readline().split()[1]
    # The fake prints a line per write: read them, or its pipe fills and it stops answering.
    threading.Thread(target=fake.stdout.read, daemon=True).start()
    started = time.monotonic()
    worker = _spawn(
        "bench.latency_worker",
        "--kubeconfig",
        str(kubeconfig),
        "--namespace",
        namespace,
        "--appliance-namespace",
        appliance_namespace,
        "--litellm-url",
        url,
        "--expect",
        str(models),
        log=work / f"converge-worker-{models}.log",
    )
    spy = None
    if profile is not None:
        spy = subprocess.Popen(
            [str(PY_SPY), "record", "--pid", str(worker.pid), "--format", "raw", "--output", str(profile)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    converged = None
    try:
        assert worker.stdout is not None
        for line in worker.stdout:
            if line.startswith("CONVERGED "):
                converged = float(line.split()[1])
                break
        wall = time.monotonic() - started
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its profile on SIGINT
            spy.wait(30)
        _stop(worker)
        _stop(fake)
    if converged is None:
        raise RuntimeError(f"the worker did not converge on {models} models (see {work})")
    return {"converge_s": converged, "process_start_to_converged_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--models", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=Path, help="py-spy each run's worker into this folder")
    args = parser.parse_args()

    starter = None
    if os.environ.get("KUBECONFIG"):
        kubeconfig = Path(os.environ["KUBECONFIG"])
    else:
        peer, starter = start_kube()
        kubeconfig = Path(peer.kubeconfig)
    kube = Kube(kubeconfig)
    if args.profile:
        ensure_py_spy()
        args.profile.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="model-catalog-converge-"))
    results: dict[str, Any] = {"machine": machine.describe(), "sizes": {}}
    try:
        for n in args.models:
            suffix = datetime.datetime.now().strftime("%H%M%S")
            ns, ans = f"conv-{n}-{suffix}", f"conv-{n}-{suffix}-system"
            kube.prepare(ns, ans)
            load_before = machine.load_average()
            created = kube.create_models(ns, range(n))
            runs = []
            for i in range(args.repeat):
                profile = args.profile / f"converge-{n}-{i}.folded" if args.profile else None
                runs.append(converge_once(kubeconfig, ns, ans, n, work=work, profile=profile))
                if profile is not None and profile.exists():
                    runs[-1]["profile"] = top_costs(profile)
                print(f"{n} models, run {i + 1}: {runs[-1]}", file=sys.stderr, flush=True)
            results["sizes"][str(n)] = {
                "models_created_s": created,
                "converge_s": summary([r["converge_s"] for r in runs]),
                "process_start_to_converged_s": summary([r["process_start_to_converged_s"] for r in runs]),
                "load_average": [load_before, machine.load_average()],
                "runs": runs,
            }
    finally:
        kube.close()
        if starter is not None:
            starter.stop()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
