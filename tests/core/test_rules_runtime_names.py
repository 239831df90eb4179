"""A runtime never takes a model name another route holds (behaviour §3; issue 32 #5).

Whoever may create Deployments in NAMESPACE can label one ``appliance.magicstick.dev/runtime=freetoken``
with an existing activation's name. It used to win that name by sorting first among FreeToken runtimes,
and outright against a KubeAI-served route (rank). Among runtimes the route that holds a name keeps it;
a second claim is a reported conflict; a tie with no holder goes to nobody, never to the name that sorts
first; a runtime the operator marks as its activation's (an owner reference whose uid is verified) wins.
"""

from hypothesis import given, settings
from hypothesis import strategies as st

from catalog_core.commands import EmitKubernetesEvent
from catalog_core.events import SourceKind
from tests.core import builders as b
from tests.core.harness import Cluster

FT_ID = "ai-appliance-freetoken-phi"
KUBE_ID = "ai-appliance-kubeai-phi"


def _runtime(name: str, **kw):
    return [b.freetoken_deployment(name, activation_name="phi", **kw), b.service(name)]


def _endpoint(name: str) -> str:
    return f"http://{name}.ai.svc.cluster.local:8080/v1"


def _served_by(c: Cluster) -> str | None:
    row = c.world.rows.get(FT_ID)
    return row["litellm_params"]["api_base"] if row else None


def _freetoken_records(c: Cluster) -> list[tuple[str, str, str]]:
    """(state, reason, the runtime named in the message) of each FreeToken record for phi."""
    return sorted(
        (r["state"], r["reason"], r.get("message", ""))
        for r in c.routes()
        if r["source"] == "freetoken" and r["name"] == "phi"
    )


def _warned(c: Cluster, deployment: str, reason: str) -> bool:
    return any(
        isinstance(w, EmitKubernetesEvent)
        and w.involved.kind == "Deployment"
        and w.involved.name == deployment
        and w.reason == reason
        for w in c.world.events
    )


def _operator_runtime(c: Cluster, *extra_healthy: str) -> None:
    c.world.healthy = frozenset({"phi-freetoken", *extra_healthy})
    c.start(b.activation("phi", kind="local", model_type="chat"), *_runtime("phi-freetoken"))
    assert _served_by(c) == _endpoint("phi-freetoken")


def test_a_second_runtime_never_takes_an_activations_name_by_sorting_first():
    c = Cluster()
    _operator_runtime(c, "a-phi")
    for obj in _runtime("a-phi"):  # "freetoken/a-phi" sorts before "freetoken/phi-freetoken"
        c.apply(obj)
    assert _served_by(c) == _endpoint("phi-freetoken")
    records = _freetoken_records(c)
    assert [(s, r) for s, r, _ in records] == [("conflict", "NameHeld"), ("published", "Published")]
    assert "freetoken/phi-freetoken" in records[0][2]
    assert _warned(c, "a-phi", "NameHeld")


def test_a_runtime_never_takes_a_name_a_kubeai_route_holds():
    c = Cluster()
    c.world.healthy = frozenset({"zz-phi"})
    c.start(b.activation("phi", kind="local", model_type="chat"), b.kubeai_model("phi"))
    assert KUBE_ID in c.world.rows
    for obj in _runtime("zz-phi"):
        c.apply(obj)
    assert KUBE_ID in c.world.rows and FT_ID not in c.world.rows
    assert c.record("phi", "kubeai")["state"] == "published"
    assert c.record("phi", "freetoken")["reason"] == "NameHeld"
    assert _warned(c, "zz-phi", "NameHeld")
    # the KubeAI Model goes: the runtime takes the name, and keeps it when the Model comes back
    c.delete(b.kubeai_model("phi"))
    assert FT_ID in c.world.rows and KUBE_ID not in c.world.rows
    c.apply(b.kubeai_model("phi"))
    assert FT_ID in c.world.rows and KUBE_ID not in c.world.rows
    assert c.record("phi", "kubeai")["reason"] == "NameHeld"


def test_the_holder_keeps_the_name_while_it_is_withheld():
    c = Cluster()
    _operator_runtime(c, "a-phi")
    for obj in _runtime("a-phi"):
        c.apply(obj)
    c.apply(b.freetoken_deployment("phi-freetoken", activation_name="phi", ready=False))
    assert _served_by(c) is None  # withdrawn with its holder, not handed to the other runtime
    reasons = sorted(r for _, r, _ in _freetoken_records(c))
    assert reasons == ["NameHeld", "NotReady"]
    c.apply(b.freetoken_deployment("phi-freetoken", activation_name="phi"))
    assert _served_by(c) == _endpoint("phi-freetoken")
    # the holder goes for good: the other runtime may take the name now
    c.delete(b.freetoken_deployment("phi-freetoken", activation_name="phi"))
    assert _served_by(c) == _endpoint("a-phi")


def test_a_restart_keeps_the_holder_litellm_holds():
    first = Cluster()
    _operator_runtime(first, "a-phi")
    for obj in _runtime("a-phi"):
        first.apply(obj)
    rows = list(first.world.rows.values())
    again = Cluster()
    again.world.healthy = frozenset({"phi-freetoken", "a-phi"})
    again.start(
        b.activation("phi", kind="local", model_type="chat"),
        *_runtime("a-phi"),
        *_runtime("phi-freetoken"),
        rows=rows,
    )
    assert _served_by(again) == _endpoint("phi-freetoken")
    assert sorted(r for _, r, _ in _freetoken_records(again)) == ["NameHeld", "Published"]
    # and across sources: the KubeAI route LiteLLM holds keeps the name after a restart too
    kube_first = Cluster()
    kube_first.world.healthy = frozenset({"zz-phi"})
    kube_first.start(b.activation("phi", kind="local"), b.kubeai_model("phi"))
    for obj in _runtime("zz-phi"):
        kube_first.apply(obj)
    kube_again = Cluster()
    kube_again.world.healthy = frozenset({"zz-phi"})
    kube_again.start(
        b.activation("phi", kind="local"),
        b.kubeai_model("phi"),
        *_runtime("zz-phi"),
        rows=list(kube_first.world.rows.values()),
    )
    assert KUBE_ID in kube_again.world.rows and FT_ID not in kube_again.world.rows


def test_a_tie_with_no_holder_goes_to_nobody():
    """Two runtimes claim a name at once and none holds it: neither is published (the one that sorts
    first used to win); each record says so; once one goes, the other is published."""
    c = Cluster()
    c.world.healthy = frozenset({"a-phi", "b-phi"})
    c.start(b.activation("phi", kind="local"), *_runtime("a-phi"), *_runtime("b-phi"))
    assert _served_by(c) is None
    assert [r for _, r, _ in _freetoken_records(c)] == ["NameContested", "NameContested"]
    assert _warned(c, "a-phi", "NameContested") and _warned(c, "b-phi", "NameContested")
    c.delete(b.freetoken_deployment("a-phi", activation_name="phi"))
    assert _served_by(c) == _endpoint("b-phi")


def test_the_runtime_its_activation_owns_wins_and_a_forged_owner_does_not():
    c = Cluster()
    c.world.healthy = frozenset({"a-phi", "phi-freetoken", "z-phi"})
    c.start(b.activation("phi", kind="local"), *_runtime("a-phi"))
    assert _served_by(c) == _endpoint("a-phi")  # the only claim: it holds the name
    # a runtime naming the activation as its owner, with a uid that is not the activation's: no mark
    for obj in _runtime("z-phi", owners=[b.activation_owner("phi", uid="guessed")]):
        c.apply(obj)
    assert _served_by(c) == _endpoint("a-phi")
    # the operator's runtime, owned by the activation (uid verified), takes the name from the holder
    for obj in _runtime("phi-freetoken", owners=[b.activation_owner("phi")]):
        c.apply(obj)
    assert _served_by(c) == _endpoint("phi-freetoken")
    reasons = sorted(r for _, r, _ in _freetoken_records(c))
    assert reasons == ["NameHeld", "NameHeld", "Published"]


def test_an_external_activation_still_outranks_every_runtime():
    """Between sources the documented priority stays: ModelActivation > ConfigMap > runtimes."""
    c = Cluster()
    _operator_runtime(c)
    c.apply(b.activation("phi", external={"model": "openai/phi"}))
    assert "ai-appliance-external-phi" in c.world.rows and FT_ID not in c.world.rows


RUNTIME_NAMES = ["a-phi", "phi-freetoken", "z-phi"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(RUNTIME_NAMES), min_size=1, max_size=3, unique=True),
    st.sets(st.sampled_from(RUNTIME_NAMES)),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_who_serves_a_name_changes_only_when_its_holder_goes_or_the_operator_marks_another(
    names, vouched, kubeai, rnd
):
    """Runtimes (and a KubeAI Model) claiming one name arrive one by one, in any order: the first to serve
    it keeps serving it, unless a runtime its activation owns comes (the only one so marked); a restart
    onto what LiteLLM holds changes nothing."""
    objs = [
        obj
        for n in names
        for obj in _runtime(n, owners=[b.activation_owner("phi")] if n in vouched else None)
    ]
    if kubeai:
        objs.append(b.kubeai_model("phi"))
    c = Cluster()
    c.world.healthy = frozenset(RUNTIME_NAMES)
    c.start(b.activation("phi", kind="local"))
    rnd.shuffle(objs)
    serving: str | None = None
    for obj in objs:
        c.apply(obj)
        now = _serving(c)
        marked = [n for n in names if n in vouched and _present(c, n)]
        if serving is not None and now != serving:
            assert len(marked) == 1 and now == marked[0], (serving, now, marked)
        serving = now or serving
    assert serving is not None  # someone serves it: there was always a first claim
    again = Cluster()
    again.world.healthy = frozenset(RUNTIME_NAMES)
    again.start(b.activation("phi", kind="local"), *objs, rows=list(c.world.rows.values()))
    assert again.world.rows == c.world.rows
    assert sorted(map(str, again.routes())) == sorted(map(str, c.routes()))


def _serving(c: Cluster) -> str | None:
    """Which runtime serves phi: a FreeToken Deployment's name, "kubeai", or None."""
    assert not (FT_ID in c.world.rows and KUBE_ID in c.world.rows)
    if KUBE_ID in c.world.rows:
        return "kubeai"
    served = _served_by(c)
    return next((n for n in RUNTIME_NAMES if served == _endpoint(n)), None)


def _present(c: Cluster, name: str) -> bool:
    return name in c.state.stored(SourceKind.FREETOKEN_DEPLOYMENTS) and name in c.state.observed.services
