"""``faultkit pager``: receive Alertmanager's webhooks and date every page as it arrives.

The receiver is :mod:`faultkit.pager`; this command parses the options, opens the log,
listens, prints one line when it listens and one line on stderr for each page, and runs
until SIGTERM or Ctrl-C. Bad input (``--listen`` not ``HOST:PORT``, a host that is not
loopback without ``--allow-remote``, a log that cannot be opened) exits 2 with one line and
starts nothing; an address already in use exits 1.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import click

from faultkit.commands.input import BadInput
from faultkit.model.timestamps import utc_clock
from faultkit.pager import DEFAULT_LISTEN, Notification, PagerLog, make_app, parse_listen, serve


@click.command()
@click.option("--listen", default=DEFAULT_LISTEN, show_default=True, metavar="HOST:PORT",
              help="address to listen on (loopback unless --allow-remote; port 0: any free)")
@click.option("--log", "log_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="append every page here as one JSON line, and read it back "
              "at start (default: keep pages in memory only)")
@click.option("--allow-remote", is_flag=True,
              help="allow a --listen host that is not loopback")
def pager(listen: str, log_path: Path | None, allow_remote: bool) -> None:
    """Receive Alertmanager's webhook notifications and date each as it arrives.

    Point a route's webhook_configs url at http://HOST:PORT/alerts; read the pages back
    with GET /notifications?since=EPOCH&until=EPOCH.
    """
    try:
        host, port = parse_listen(listen, allow_remote=allow_remote)
    except ValueError as exc:
        raise BadInput(f"--listen {listen}: {exc}") from exc
    try:
        log = PagerLog(log_path)
    except OSError as exc:
        raise BadInput(f"--log {log_path}: cannot open it: {exc.strerror or exc}") from exc
    try:
        asyncio.run(_run(log, host, port))
    finally:
        log.close()


async def _run(log: PagerLog, host: str, port: int) -> None:
    app = make_app(log, on_page=_print_page)
    try:
        runner, bound = await serve(app, host, port)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise click.ClickException(
            f"cannot listen on {host}:{port}: {reason}; choose another --listen port or "
            "stop what holds it") from exc
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    shown = f"[{host}]" if ":" in host else host
    where = f"{log.path}" if log.path is not None else "none, pages kept in memory only"
    kept = f", {len(log)} pages read back" if len(log) else ""
    torn = f", {log.skipped} unreadable lines skipped" if log.skipped else ""
    click.echo(f"pager listening on http://{shown}:{bound} (log: {where}{kept}{torn})")
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def _print_page(notification: Notification) -> None:
    click.echo(f"{utc_clock(notification.t_received)} page: {notification.summary()}",
               err=True)
