"""A journal record: one fault, where it acts, and the ordered steps that undo it, as data
(:mod:`faultkit.faults.undo` replays them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

State = Literal["applying", "applied", "reverted"]


@dataclass(slots=True)
class JournalRecord:
    """One fault: what it is, where, and the ordered steps that undo it."""

    id: str
    kind: str
    node: str
    description: str
    params: dict[str, Any] = field(default_factory=dict)
    undo: list[dict[str, Any]] = field(default_factory=list)
    state: State = "applying"
    pid: int = 0
    t_created: float = 0.0
    t_reverted: float | None = None
    note: str = ""
    #: the node-lock keys the fault held (:mod:`faultkit.faults.locks`); the sweep takes
    #: them while it replays the record
    node_locks: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JournalRecord:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})
