"""The ledger's columnar schema: :class:`~faultkit.model.records.RequestRecord` ⇄ Arrow
record batch.

One Arrow column per ``RequestRecord`` field, in the dataclass's field order, with the same
names and meaning as ``ledger.jsonl`` (docs/run-directory.md, "ledger.arrows"):

* ``id``, ``node``, ``kind``, ``status``: ``string``, never null;
* ``error_class``, ``error_detail``, ``finish_reason``, ``served_by``, ``workload``:
  ``string``, null when absent;
* every ``t_*`` field: ``float64`` epoch seconds (``t_invoke`` and ``t_end`` never null);
* ``http_status``, ``prompt_tokens``, ``output_tokens``: ``int64``, null when absent;
* ``chunks``, ``content_chunks``: ``int64``; ``output_tokens_from_usage``, ``error_body``:
  ``bool``;
* ``itl_s``: ``list<float64>`` (an empty list, never null).

The conversion is lossless both ways: ``records_from_batch(record_batch(rs)) == rs``.
The schema carries ``faultkit.ledger = "1"`` in its metadata; a reader ignores columns it
does not know and fills a known one the file lacks with the field's default, as
``RequestRecord.from_json`` does for JSON lines.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from faultkit.model.records import RequestRecord

__all__ = [
    "FIELD_NAMES",
    "SCHEMA",
    "SCHEMA_VERSION",
    "batches_of",
    "record_batch",
    "records_from_batch",
    "rows_from_batch",
]

#: Bumped when a column changes meaning; added columns do not bump it.
SCHEMA_VERSION = "1"

_NOT_NULL = {"id", "node", "kind", "status", "t_invoke", "t_end"}
_TYPES: dict[str, pa.DataType] = {
    "id": pa.string(),
    "node": pa.string(),
    "kind": pa.string(),
    "t_invoke": pa.float64(),
    "status": pa.string(),
    "t_end": pa.float64(),
    "t_first_byte": pa.float64(),
    "t_first_token": pa.float64(),
    "t_last_token": pa.float64(),
    "http_status": pa.int64(),
    "error_class": pa.string(),
    "error_detail": pa.string(),
    "finish_reason": pa.string(),
    "prompt_tokens": pa.int64(),
    "output_tokens": pa.int64(),
    "output_tokens_from_usage": pa.bool_(),
    "chunks": pa.int64(),
    "content_chunks": pa.int64(),
    "itl_s": pa.list_(pa.field("item", pa.float64(), nullable=False)),
    "t_scheduled": pa.float64(),
    "error_body": pa.bool_(),
    "served_by": pa.string(),
    "gateway_retries": pa.int64(),
    "workload": pa.string(),
}

#: ``RequestRecord``'s fields, in declaration order: the column order.
FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RequestRecord))
assert set(FIELD_NAMES) == set(_TYPES), "every RequestRecord field needs a column type"

SCHEMA: pa.Schema = pa.schema(
    [
        pa.field(
            name,
            _TYPES[name],
            nullable=name not in _NOT_NULL and name not in ("chunks", "content_chunks"),
        )
        for name in FIELD_NAMES
    ],
    metadata={"faultkit.ledger": SCHEMA_VERSION},
)

_ROW = operator.attrgetter(*FIELD_NAMES)
_ITL = FIELD_NAMES.index("itl_s")
_DEFAULTS: dict[str, Any] = {
    f.name: f.default
    for f in dataclasses.fields(RequestRecord)
    if f.default is not dataclasses.MISSING
}


def record_batch(records: Sequence[RequestRecord]) -> pa.RecordBatch:
    """The records as one Arrow record batch of :data:`SCHEMA` (in the given order)."""
    columns = list(zip(*map(_ROW, records), strict=True)) if records else [()] * len(FIELD_NAMES)
    arrays: list[pa.Array] = []
    for name, values in zip(FIELD_NAMES, columns, strict=True):
        if name == "itl_s":
            arrays.append(_itl_array(values))
        else:
            arrays.append(pa.array(values, type=_TYPES[name]))
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def _itl_array(values: Sequence[tuple[float, ...]]) -> pa.Array:
    """``list<float64>`` from tuples: one flat buffer plus offsets (faster than nested)."""
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum([len(v) for v in values], out=offsets[1:])
    flat = np.fromiter(itertools.chain.from_iterable(values), dtype=np.float64, count=offsets[-1])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat), type=_TYPES["itl_s"])


def rows_from_batch(batch: pa.RecordBatch) -> Iterator[dict[str, Any]]:
    """Each row as a ``RequestRecord.to_json()``-shaped dict (field order, known fields only).

    A column the batch lacks takes the field's default (``None`` for an optional one).
    """
    present = set(batch.schema.names)
    columns = {name: batch.column(name).to_pylist() for name in FIELD_NAMES if name in present}
    for i in range(batch.num_rows):
        yield {
            name: (columns[name][i] if name in columns else _DEFAULTS.get(name))
            for name in FIELD_NAMES
        }


def records_from_batch(batch: pa.RecordBatch) -> list[RequestRecord]:
    """The batch's rows as records (the inverse of :func:`record_batch`)."""
    return [RequestRecord.from_json(row) for row in rows_from_batch(batch)]


def batches_of(records: Iterable[RequestRecord], rows: int) -> Iterator[pa.RecordBatch]:
    """Record batches of at most ``rows`` records each (for a ledger held as records)."""
    it = iter(records)
    while chunk := list(itertools.islice(it, rows)):
        yield record_batch(chunk)
