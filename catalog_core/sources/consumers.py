"""Consumer pods and the workloads that own them — behaviour §9, §9.2."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from catalog_core import raw
from catalog_core.catalog_files import CONSUMER_LABELS
from catalog_core.sources.common import CATALOG_HASH_ANNOTATION, CONSUMER_MARK


def is_consumer(labels: Mapping[str, str], annotations: Mapping[str, str]) -> bool:
    """behaviour §9: the consumer mark, or every label of an app that reads one of the catalog's files
    (``catalog_files.CONSUMER_LABELS``)."""
    if labels.get(CONSUMER_MARK) == "true" or annotations.get(CONSUMER_MARK) == "true":
        return True
    for app in CONSUMER_LABELS:
        for key, value in app:
            if labels.get(key) != value:
                break
        else:
            return True
    return False


@attrs.frozen
class OwnerRef:
    """One ownerReference: what it names. Anyone who may create an object may write any of it; only the
    uid, compared with the uid of the object it names, tells a true reference from a forged one."""

    kind: str
    name: str
    uid: str


def controller_owner(obj: Mapping[str, Any]) -> OwnerRef | None:
    """The controlling ownerReference, else the first one, if any."""
    refs = raw.path(obj, "metadata", "ownerReferences")
    chosen: OwnerRef | None = None
    for ref in refs if isinstance(refs, list) else []:
        kind, name = raw.string(ref, "kind"), raw.string(ref, "name")
        if not kind or not name:
            continue
        owner = OwnerRef(kind, name, raw.string(ref, "uid") or "")
        if raw.path(ref, "controller") is True:
            return owner
        chosen = chosen or owner
    return chosen


@attrs.frozen
class ConsumerPod:
    name: str
    uid: str
    owner_kind: str | None
    owner_name: str | None
    catalog_hash: str | None  # the pod's own annotation, when its creator stamps one
    terminating: bool
    owner_uid: str = ""  # the uid its owner reference gives (checked against the owner's own)

    @classmethod
    def from_k8s(cls, obj: Mapping[str, Any]) -> ConsumerPod | None:
        """None for pods that are not consumers."""
        name = raw.name_of(obj)
        labels = raw.string_map(obj, "metadata", "labels")
        annotations = raw.string_map(obj, "metadata", "annotations")
        if not name or not is_consumer(labels, annotations):
            return None
        owner = controller_owner(obj)
        return cls(
            name=name,
            uid=raw.uid_of(obj),
            owner_kind=owner.kind if owner else None,
            owner_name=owner.name if owner else None,
            catalog_hash=annotations.get(CATALOG_HASH_ANNOTATION),
            terminating=raw.path(obj, "metadata", "deletionTimestamp") is not None,
            owner_uid=owner.uid if owner else "",
        )


@attrs.frozen
class ReplicaSetOwner:
    name: str
    deployment: str | None
    uid: str = ""
    deployment_uid: str = ""  # the uid its owner reference gives the Deployment

    @classmethod
    def from_k8s(cls, obj: Mapping[str, Any]) -> ReplicaSetOwner | None:
        name = raw.name_of(obj)
        if not name:
            return None
        owner = controller_owner(obj)
        deployment = owner if owner is not None and owner.kind == "Deployment" else None
        return cls(
            name,
            deployment.name if deployment else None,
            raw.uid_of(obj),
            deployment.uid if deployment else "",
        )


@attrs.frozen
class Workload:
    """A workload of a rollable kind (``catalog_core/kinds.py``): the catalog hash its pod template carries,
    and whether it is a consumer itself (its pod template, or the workload, carries the consumer mark or a
    known app's labels): only such a workload is ever rolled (behaviour §9.2)."""

    kind: str
    name: str
    uid: str
    template_hash: str | None
    consumer: bool = False

    @classmethod
    def from_k8s(
        cls, obj: Mapping[str, Any], kind: str, template: tuple[str, ...] = ("spec", "template")
    ) -> Workload | None:
        """``template``: where the workload's pod template is."""
        name = raw.name_of(obj)
        if not name:
            return None
        annotations = raw.string_map(obj, *template, "metadata", "annotations")
        consumer = is_consumer(
            raw.string_map(obj, *template, "metadata", "labels"), annotations
        ) or is_consumer(
            raw.string_map(obj, "metadata", "labels"), raw.string_map(obj, "metadata", "annotations")
        )
        return cls(kind, name, raw.uid_of(obj), annotations.get(CATALOG_HASH_ANNOTATION), consumer)
