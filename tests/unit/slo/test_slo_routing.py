"""slo.routing: when a gateway stopped sending users to a dead upstream (served_by)."""

from __future__ import annotations

from faultkit.model.records import RequestRecord
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


def _hang(until: float = 20.0, back: float = 8.0) -> list[RequestRecord]:
    """A pause of 'b' from T0 to T0+``back``: every other request goes to 'b' and is
    answered (late) once it resumes; the rest are served by 'a'."""
    return [_r(i, round(i * 0.2, 1), "b" if i % 2 else "a") for i in range(int(until / 0.2))]


def test_a_request_sent_to_the_upstream_while_it_was_down_is_a_hit_even_if_served() -> None:
    late = _r(0, 3.0, "b")  # arrived during the pause, answered when it resumed
    assert hit_dead_upstream(late, "b", t_back=T0 + 8.0)
    assert not hit_dead_upstream(late, "b")  # without t_back: a success, not a hit
    assert not hit_dead_upstream(_r(1, 9.0, "b"), "b", t_back=T0 + 8.0)  # it serves again
    assert hit_dead_upstream(_r(2, 9.0, "b", "fail", "stream_error"), "b", t_back=T0 + 8.0)


def test_a_gateway_that_kept_sending_users_to_a_hung_upstream_never_routed_while_down() -> None:
    result = route_around(_hang(), "gw", "b", T0, T0 + 20, t_back=T0 + 8.0)
    # the last request sent to b while down arrived at 7.8 s: the stretch starts at 8.0 s
    assert result.t_routed == T0 + 8.0 and result.routed_while_down is False
    assert result.t_back_in_rotation == T0 + 8.2  # the first one b served from t_back on
    assert result.back_in_rotation_s is not None and abs(result.back_in_rotation_s - 8.2) < 1e-9
    assert result.idle_after_back_s is not None and abs(result.idle_after_back_s - 0.2) < 1e-9
    data = result.to_json()
    assert data["routed_while_down"] is False and data["t_back"] == T0 + 8.0


def test_a_killed_upstream_cooled_down_then_back_in_rotation_after_its_cooldown() -> None:
    # b died at T0: one stream cut, then nothing sent to it until 10.4 s (the cooldown),
    # although it was ready again at 3.0 s
    records = [_r(i, round(i * 0.2, 1), "a") for i in range(100)]
    records[1] = _r(1, 0.2, "b", "fail", "stream_error")
    records[52] = _r(52, 10.4, "b")
    result = route_around(records, "gw", "b", T0, T0 + 20, t_back=T0 + 3.0)
    assert result.t_routed == T0 + 0.4 and result.routed_while_down is True
    assert result.t_back_in_rotation == T0 + 10.4
    assert result.idle_after_back_s is not None and abs(result.idle_after_back_s - 7.4) < 1e-9


def test_an_upstream_never_served_again_within_the_window_has_no_rotation_figure() -> None:
    result = route_around(_load({0.2: ("b", "stream_error")}), "gw", "b", T0, T0 + 20,
                          t_back=T0 + 3.0)
    assert result.t_back_in_rotation is None and result.back_in_rotation_s is None
    assert result.idle_after_back_s is None and result.routed_while_down is True


def test_a_hit_free_moment_just_before_the_upstream_came_back_is_not_routing_around() -> None:
    """Measured (a partition): the last request sent to b while down arrived 0.5 s before
    t_back, the next ones went elsewhere by chance, and b served users again at once."""
    records = _hang(until=20.0, back=8.0)
    for r in records:  # nobody sent to b from 7.6 s until it is back at 8.0 s
        if 7.6 <= r.t_invoke - T0 < 8.0 and r.served_by == "b":
            object.__setattr__(r, "served_by", "a")
    result = route_around(records, "gw", "b", T0, T0 + 20, t_back=T0 + 8.0)
    assert result.t_routed is not None and result.t_routed < T0 + 8.0
    assert result.routed_while_down is False  # b was used within the stretch


def test_a_chance_gap_in_the_middle_of_a_hang_is_not_routing_around() -> None:
    """A hung b (paused 8 s): by chance nobody was sent to it from 2.0 to 5.4 s (a clean
    3 s stretch), then the gateway sent users to it again until it was back: it never
    stopped using it, so it did not route around it while it was down."""
    records = _hang(until=20.0, back=8.0)
    for r in records:
        if 2.0 <= r.t_invoke - T0 < 5.4 and r.served_by == "b":
            object.__setattr__(r, "served_by", "a")
    result = route_around(records, "gw", "b", T0, T0 + 20, t_back=T0 + 8.0)
    assert result.t_routed == T0 + 2.0  # the stretch is still where routing would start
    assert result.routed_while_down is False


def test_an_outage_shorter_than_the_stretch_does_not_say_whether_the_gateway_routed() -> None:
    """sim-vllm back 2.6 s after a kill, one attempt on it retried
    elsewhere, then served by it again at once. No 3 s stretch fits in a 2.6 s outage:
    neither "routed" nor "kept sending users" is shown."""
    records = [_r(i, round(i * 0.2, 1), "a") for i in range(100)]
    records[14] = _r(14, 2.8, "b")  # served by b again, 0.2 s after it was back
    result = route_around(records, "gw", "b", T0, T0 + 20, t_back=T0 + 2.6)
    assert result.t_routed == T0 and result.outage_s is not None
    assert abs(result.outage_s - 2.6) < 1e-9 and result.outage_too_short
    assert result.routed_while_down is None
    assert result.to_json()["outage_s"] == result.outage_s
    # down 3.0 s and served again 0.2 s later: a whole stretch fits, and it is judged
    records[14], records[16] = _r(14, 2.8, "a"), _r(16, 3.2, "b")
    judged = route_around(records, "gw", "b", T0, T0 + 20, t_back=T0 + 3.0)
    assert not judged.outage_too_short and judged.routed_while_down is True
