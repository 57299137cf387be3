"""slo.routing: when a gateway stopped sending users to a dead upstream (served_by)."""

from __future__ import annotations

from faultkit.records import RequestRecord
from slo.routing import hit_dead_upstream, route_around

T0 = 1_000.0


def _r(i: int, t: float, served_by: str | None, status: str = "ok",
       error_class: str | None = None, node: str = "gw") -> RequestRecord:
    return RequestRecord(
        id=f"r{i}", node=node, kind="chat", t_invoke=T0 + t, t_scheduled=T0 + t,
        status=status, t_end=T0 + t + 0.5, error_class=error_class,  # type: ignore[arg-type]
        served_by=served_by,
    )


def _load(hits: dict[float, tuple[str | None, str]], until: float = 20.0) -> list[RequestRecord]:
    """A request every 0.2 s served by 'a'; ``hits`` replaces some by failures."""
    out = []
    for i in range(int(until / 0.2)):
        t = round(i * 0.2, 1)
        if t in hits:
            served, error = hits[t]
            out.append(_r(i, t, served, "fail", error))
        else:
            out.append(_r(i, t, "a"))
    return out


def test_what_counts_as_hitting_the_dead_upstream() -> None:
    assert hit_dead_upstream(_r(0, 0, "b", "fail", "stream_error"), "b")
    assert hit_dead_upstream(_r(0, 0, None, "fail", "http_5xx"), "b")  # the gateway's own 500
    assert not hit_dead_upstream(_r(0, 0, "a", "fail", "stream_error"), "b")
    assert not hit_dead_upstream(_r(0, 0, "b"), "b")  # served again: restarted
    assert not hit_dead_upstream(_r(0, 0, None, "fail", "shed_client"), "b")


def test_routed_at_the_first_request_after_the_last_hit_before_a_clean_stretch() -> None:
    records = _load({0.2: ("b", "stream_error"), 0.4: (None, "http_5xx"), 1.0: (None, "http_5xx"),
                     12.0: (None, "http_5xx")})
    result = route_around(records, "gw", "b", T0, T0 + 20)
    assert result.t_routed == T0 + 1.2
    assert result.route_around_s is not None and abs(result.route_around_s - 1.2) < 1e-9
    assert result.hits == 4 and result.t_last_hit == T0 + 12.0  # a later burst still counts
    assert result.to_json()["route_around_s"] == result.route_around_s


def test_no_hit_at_all_means_routed_at_t_effect_and_other_nodes_are_ignored() -> None:
    records = [*_load({}), _r(999, 1.0, None, "fail", "http_5xx", node="other")]
    result = route_around(records, "gw", "b", T0, T0 + 20)
    assert result.t_routed == T0 and result.hits == 0


def test_hits_all_along_mean_never_routed() -> None:
    records = _load({round(t * 0.2, 1): (None, "http_5xx") for t in range(0, 100, 10)})
    result = route_around(records, "gw", "b", T0, T0 + 20, stretch_s=3.0)
    assert result.t_routed is None and result.route_around_s is None


def test_a_stretch_too_close_to_the_window_end_does_not_count() -> None:
    records = _load({18.0: (None, "http_5xx")})
    result = route_around(records, "gw", "b", T0 + 16.0, T0 + 20, stretch_s=3.0)
    assert result.t_routed is None
