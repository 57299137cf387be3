"""Translate a transport exception (the client's own, socket, OS) into an error class.

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

from faultkit.load.dialer import ConnectError, ConnectTimeout

#: errno values that mean the client itself is out of resources (not the node's doing).
_EXHAUSTION_ERRNOS: frozenset[int] = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.EADDRNOTAVAIL, errno.ENOBUFS}
)
#: the same, as the kernel words them (for errno-less "Multiple exceptions: ..." errors)
_EXHAUSTION_TEXTS = ("too many open files", "cannot assign requested address")


def classify_exception(exc: BaseException) -> tuple[str, str]:
    """Map a transport exception to ``(error_class, short detail)``. The one translation point.

    Client resource exhaustion (``EMFILE``, ``ENFILE``, ``EADDRNOTAVAIL``, ``ENOBUFS``,
    wrapped in a connect error or not) is ``client_exhausted`` and wins over every other class.
    """
    name = type(exc).__name__
    exhausted = _exhaustion(exc)
    if exhausted is not None:
        return "client_exhausted", f"client out of resources: {exhausted} ({name})"
    if isinstance(exc, ConnectError):
        os_err, server = exc.os_error, exc.server
        if isinstance(os_err, ConnectionRefusedError) or os_err.errno == errno.ECONNREFUSED:
            return "refused", f"connection refused by {server}"
        if isinstance(os_err, TimeoutError):
            return "timeout_connect", f"connect to {server} timed out"
        if isinstance(os_err, ConnectionResetError | ConnectionAbortedError) or os_err.errno in (
            errno.ECONNRESET,
            errno.ECONNABORTED,
        ):
            # Accepted by the kernel's backlog of a dying listener, then torn down.
            return "reset", f"connection reset by {server} while connecting"
        return "other", f"cannot connect to {server}: {os_err.strerror or type(os_err).__name__}"
    if isinstance(exc, ConnectTimeout):
        return "timeout_connect", str(exc)
    if isinstance(exc, OSError) and not isinstance(exc, TimeoutError):
        # ConnectionError (reset, broken pipe, http1's ServerDisconnected and
        # PayloadIncomplete, a response that is not HTTP) and other socket errors
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
        if isinstance(err, ConnectError):
            todo.append(err.os_error)
        todo += [err.__cause__, err.__context__]
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else ""

