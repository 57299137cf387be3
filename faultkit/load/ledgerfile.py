"""The columnar ledger file, ``ledger.arrows``: an Arrow IPC stream appended batch by batch.

**Format.** The Arrow IPC *streaming* format (``.arrows``, media type
``application/vnd.apache.arrow.stream``) with LZ4-frame-compressed buffers, one
:data:`~faultkit.load.columnar.SCHEMA` record batch per flush. Any Arrow reader opens it
(``pyarrow.ipc.open_stream``, ``polars.read_ipc_stream``, DuckDB through Arrow). Parquet was
measured and not chosen: a Parquet file is unreadable until its footer is written at
close, so a crash would lose the whole ledger, and its ``list<float64>`` ITL column decodes
about 5x slower than Arrow's (docs/ledger.md).

**Writing** (:class:`ArrowLedgerWriter`). ``write()`` only queues the record; a writer
thread appends the queued records as one batch when ``batch_rows`` are waiting or
``batch_s`` seconds after the oldest of them arrived, whichever comes first, and fsyncs.
The queue holds at most ``2 × batch_rows`` records: when the disk cannot keep up,
``write()`` blocks rather than letting memory grow. So memory is bounded by about three
batches of records, whatever the run's length.

**Crash.** Each batch is appended whole and fsync'd; nothing already in the file is
rewritten. A reader (:func:`iter_batches`) returns every complete batch and skips a torn
last one, so a crash loses exactly the records not yet flushed: those that finished in the
last ``batch_s`` seconds (at most ``batch_rows`` + the queue), never an earlier one. The
JSON-lines ledger, flushed per record, is the complete copy when one is written too.

**Reading** (:func:`iter_batches`, :func:`iter_records`) accepts an Arrow ledger, a JSON-lines
ledger (converted on the fly) or a run directory (its ``ledger.arrows``, else its
``ledger.jsonl``), so every command works on old run directories too.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

import pyarrow as pa

from faultkit.errors import LedgerFileError
from faultkit.load.columnar import SCHEMA, batches_of, record_batch, records_from_batch
from faultkit.model.records import RequestRecord, iter_jsonl
from faultkit.rundir import LEDGER_ARROWS, LEDGER_JSONL

__all__ = [
    "ARROW_NAME",
    "BATCH_ROWS",
    "BATCH_S",
    "JSONL_NAME",
    "ArrowLedgerWriter",
    "iter_batches",
    "iter_records",
    "resolve_ledger",
]

log = logging.getLogger(__name__)

#: The file names in a run directory.
#: a run directory's ledger files (their names are the run directory's: faultkit.rundir)
ARROW_NAME = LEDGER_ARROWS
JSONL_NAME = LEDGER_JSONL
#: Default flush policy: a batch every 16,384 records or 10 s, whichever comes first. At
#: 300 req/s that is one 3,000-record batch per 10 s (360 batches an hour).
BATCH_ROWS = 16_384
BATCH_S = 10.0
#: the Arrow IPC continuation marker every stream message starts with
_ARROW_MAGIC = b"\xff\xff\xff\xff"
_COMPRESSION = "lz4"


class _Flush:
    """A request to flush now; ``done`` is set once the batch is in the file."""

    def __init__(self) -> None:
        self.done = threading.Event()


_CLOSE = object()


class ArrowLedgerWriter:
    """Appends finished records to an Arrow ledger file from a background thread.

    The file is created at once (``FileExistsError`` if it exists: a ledger is never
    overwritten) and holds a valid, empty ledger until the first flush. ``write`` is cheap
    (a queue put) and never raises for an I/O error: the writer thread keeps the first
    error, logs it and drops further records; :meth:`flush` and :meth:`close` raise it as
    :class:`~faultkit.errors.LedgerFileError`. Not for several processes at once.
    """

    def __init__(
        self,
        path: Path,
        *,
        batch_rows: int = BATCH_ROWS,
        batch_s: float = BATCH_S,
        fsync: bool = True,
    ) -> None:
        if batch_rows < 1 or not batch_s > 0:
            raise ValueError(
                f"batch_rows must be ≥ 1 and batch_s > 0 (got {batch_rows}, {batch_s})"
            )
        self.path = path
        self.batch_rows = batch_rows
        self.batch_s = batch_s
        self._fsync = fsync
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[bytes] = path.open("xb", buffering=0)
        options = pa.ipc.IpcWriteOptions(compression=_COMPRESSION)
        self._stream = pa.ipc.new_stream(self._fh, SCHEMA, options=options)
        self._sync()
        self._queue: queue.Queue[object] = queue.Queue(maxsize=2 * batch_rows)
        self._error: BaseException | None = None
        self._closed = False
        #: records in the file (complete, fsync'd batches)
        self.rows_written = 0
        self.batches_written = 0
        self._thread = threading.Thread(
            target=self._run, name=f"ledger-writer:{path.name}", daemon=True
        )
        self._thread.start()

    # ------------------------------------------------------------------ caller's side
    def write(self, record: RequestRecord) -> None:
        """Queue one finished record (blocks only when the writer is ``2 × batch_rows`` behind)."""
        if self._closed:
            raise LedgerFileError(self.path, "write after close (a harness bug)")
        self._queue.put(record)

    def flush(self) -> None:
        """Append every record queued so far and wait until it is in the file."""
        if not self._closed:
            request = _Flush()
            self._queue.put(request)
            request.done.wait()
        self._raise_error()

    def close(self) -> None:
        """Flush, end the stream and close the file; idempotent. Raises a writer error."""
        if not self._closed:
            self._closed = True
            self._queue.put(_CLOSE)
            self._thread.join()
        self._raise_error()

    def __enter__(self) -> ArrowLedgerWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _raise_error(self) -> None:
        if self._error is not None:
            raise LedgerFileError(self.path, str(self._error)) from self._error

    # ------------------------------------------------------------------ writer thread
    def _run(self) -> None:
        pending: list[RequestRecord] = []
        due = 0.0
        while True:
            timeout = max(0.0, due - time.monotonic()) if pending else None
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                self._append(pending)  # the oldest pending record waited batch_s
                pending = []
                continue
            if isinstance(item, RequestRecord):
                if not pending:
                    due = time.monotonic() + self.batch_s
                pending.append(item)
                if len(pending) >= self.batch_rows:
                    self._append(pending)
                    pending = []
            elif isinstance(item, _Flush):
                self._append(pending)
                pending = []
                item.done.set()
            else:  # _CLOSE
                self._append(pending)
                self._finish()
                return

    def _append(self, records: Sequence[RequestRecord]) -> None:
        if not records or self._error is not None:
            return
        try:
            self._stream.write_batch(record_batch(records))
            self._sync()
        except Exception as exc:  # the disk, not the records: keep the first error
            self._error = exc
            log.error(
                "ledger file %s: cannot append %d record(s): %s", self.path, len(records), exc
            )
            return
        self.rows_written += len(records)
        self.batches_written += 1

    def _sync(self) -> None:
        if self._fsync:
            os.fsync(self._fh.fileno())

    def _finish(self) -> None:
        try:
            self._stream.close()  # writes the end-of-stream marker
            self._sync()
        except Exception as exc:
            self._error = self._error or exc
        try:
            self._fh.close()
        except OSError as exc:
            self._error = self._error or exc


# ---------------------------------------------------------------------- reading


def resolve_ledger(path: Path) -> Path:
    """The ledger file ``path`` names: itself, or a run directory's ``ledger.arrows`` (else
    its ``ledger.jsonl``). Raises :class:`~faultkit.errors.LedgerFileError` if there is none."""
    if path.is_dir():
        for name in (ARROW_NAME, JSONL_NAME):
            if (path / name).is_file():
                return path / name
        raise LedgerFileError(
            path, f"no {ARROW_NAME} or {JSONL_NAME} here; give a run directory or a ledger file"
        )
    if not path.is_file():
        raise LedgerFileError(path, "no such file or directory")
    return path


def is_arrow(path: Path) -> bool:
    """True when ``path`` is an Arrow stream (by its first bytes; an empty file is not)."""
    with path.open("rb") as fh:
        return fh.read(4) == _ARROW_MAGIC


def iter_batches(
    path: Path,
    columns: Sequence[str] | None = None,
    *,
    rows: int = BATCH_ROWS,
    problems: list[str] | None = None,
) -> Iterator[pa.RecordBatch]:
    """The ledger's record batches, in file order, with only ``columns`` (default: all).

    An Arrow ledger is read batch by batch (memory: about one batch); a torn
    last batch (a crash mid-append) ends the stream and is described in ``problems``. A
    JSON-lines ledger is read line by line and cut into batches of ``rows`` records.
    ``path`` may be a run directory (:func:`resolve_ledger`).
    """
    path = resolve_ledger(path)
    if not is_arrow(path):
        records = (RequestRecord.from_json(d) for d in iter_jsonl(path))
        for batch in batches_of(records, rows):
            yield batch.select(list(columns)) if columns is not None else batch
        return
    with pa.OSFile(str(path)) as source:
        try:
            schema = pa.ipc.open_stream(source).schema
        except (pa.ArrowInvalid, OSError) as exc:
            if problems is not None:
                problems.append(f"{path}: no complete schema ({exc})")
            return
        names = list(columns) if columns is not None else schema.names
        missing = [n for n in names if n not in schema.names]
        if missing:
            raise LedgerFileError(path, f"no column(s) {', '.join(missing)} in this ledger")
        options = pa.ipc.IpcReadOptions(
            included_fields=[schema.get_field_index(n) for n in names], use_threads=True
        )
        source.seek(0)
        reader = pa.ipc.open_stream(source, options=options)
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            except (pa.ArrowInvalid, OSError) as exc:  # torn by a crash mid-append
                if problems is not None:
                    problems.append(f"{path}: torn last batch skipped ({exc})")
                return
            yield batch.select(names)


def iter_records(path: Path, *, problems: list[str] | None = None) -> Iterator[RequestRecord]:
    """Every record of the ledger, in file order (memory: one batch)."""
    for batch in iter_batches(path, problems=problems):
        yield from records_from_batch(batch)
