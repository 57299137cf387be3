"""Translate a transport exception (aiohttp, socket, OS) into an error class.

:func:`classify_exception` is the one place that does; :mod:`faultkit.load.client` calls
it for whatever a request raised. Classes: ``refused``, ``reset``, ``timeout_connect``,
``timeout_total``, ``client_exhausted`` (the client ran out of its own resources:
``EMFILE``/``ENFILE``/``EADDRNOTAVAIL``/``ENOBUFS``, found anywhere in the exception's
chain; it wins over every other class and never reads as the node's doing) and ``other``.
The detail is short and never contains request or response headers.
"""

from __future__ import annotations

import errno
import os

import aiohttp

#: errno values that mean the client itself is out of resources (not the node's doing).
_EXHAUSTION_ERRNOS: frozenset[int] = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.EADDRNOTAVAIL, errno.ENOBUFS}
)
#: the same, as the kernel words them (for errno-less "Multiple exceptions: ..." errors)
_EXHAUSTION_TEXTS = ("too many open files", "cannot assign requested address")


def classify_exception(exc: BaseException) -> tuple[str, str]:
    """Map a transport exception to ``(error_class, short detail)``. The one translation point.

    Client resource exhaustion (``EMFILE``, ``ENFILE``, ``EADDRNOTAVAIL``, ``ENOBUFS``,
    wrapped by aiohttp or not) is ``client_exhausted`` and wins over every other class.
    """
    name = type(exc).__name__
    exhausted = _exhaustion(exc)
    if exhausted is not None:
        return "client_exhausted", f"client out of resources: {exhausted} ({name})"
    if isinstance(exc, aiohttp.ClientConnectorError):
        os_err = exc.os_error
        if isinstance(os_err, ConnectionRefusedError) or os_err.errno == errno.ECONNREFUSED:
            return "refused", f"connection refused by {exc.host}:{exc.port}"
        if isinstance(os_err, TimeoutError):
            return "timeout_connect", f"connect to {exc.host}:{exc.port} timed out"
        if isinstance(os_err, ConnectionResetError | ConnectionAbortedError) or os_err.errno in (
            errno.ECONNRESET,
            errno.ECONNABORTED,
        ):
            # Accepted by the kernel's backlog of a dying listener, then torn down.
            return "reset", f"connection reset by {exc.host}:{exc.port} while connecting"
        return "other", f"cannot connect to {exc.host}:{exc.port}: {os_err.strerror or name}"
    if isinstance(exc, aiohttp.ConnectionTimeoutError | aiohttp.ServerTimeoutError):
        return "timeout_connect", f"connect timed out ({name})"
    if isinstance(
        exc,
        aiohttp.ServerDisconnectedError
        | aiohttp.ClientPayloadError
        | aiohttp.ClientOSError
        | ConnectionError,
    ):
        return "reset", f"connection broken: {name}: {_first_line(exc)}"
    if isinstance(exc, TimeoutError):
        return "timeout_total", f"timed out ({name})"
    return "other", f"{name}: {_first_line(exc)}"


def _exhaustion(exc: BaseException) -> str | None:
    """What the client ran out of, if ``exc`` (or an error it wraps) says so; else None."""
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        err = todo.pop()
        if err is None or any(err is s for s in seen) or len(seen) > 8:
            continue
        seen.append(err)
        if isinstance(err, OSError):
            if err.errno in _EXHAUSTION_ERRNOS:
                code = errno.errorcode.get(err.errno, str(err.errno))
                return f"{code}: {err.strerror or os.strerror(err.errno)}"
            text = str(err).lower()
            for phrase in _EXHAUSTION_TEXTS:
                if phrase in text:
                    return phrase
        if isinstance(err, aiohttp.ClientConnectorError):
            todo.append(err.os_error)
        todo += [err.__cause__, err.__context__]
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else ""

