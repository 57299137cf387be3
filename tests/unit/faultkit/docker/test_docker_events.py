"""Docker's raw events become timeline evidence: exit codes, OOM kills, restarts."""

from faultkit.docker.events import container_events

T = 1_800_000_000


def raw(action: str, dt: float, **attrs: str) -> dict[str, object]:
    return {
        "Type": "container",
        "Action": action,
        "timeNano": int((T + dt) * 1e9),
        "Actor": {"Attributes": {"name": "c", **attrs}},
    }


def test_oom_kill_then_restart_is_one_restart_seen_with_oom() -> None:
    events = container_events(
        [raw("oom", 0.0), raw("die", 0.1, exitCode="137"), raw("start", 0.6)], "n"
    )
    kinds = [e.kind for e in events]
    assert kinds == ["docker_oom", "docker_die", "docker_start", "restart_seen"]
    restart = events[-1]
    assert restart.data == {"exit_code": 137, "oom_killed": True}
    assert restart.t == T + 0.6
    assert all(e.source == "harness" and e.node == "n" for e in events)


def test_sigkill_is_not_an_oom_and_exec_noise_is_dropped() -> None:
    events = container_events(
        [
            raw("oom", 0.0),
            raw("exec_start: sh", 1.0),
            raw("kill", 5.0, signal="9"),
            raw("die", 5.1, exitCode="137"),
            raw("health_status: healthy", 5.2),
            raw("start", 6.0),
        ],
        "n",
    )
    assert [e.kind for e in events] == [
        "docker_oom",
        "docker_kill",
        "docker_die",
        "docker_start",
        "restart_seen",
    ]
    assert events[1].data["signal"] == "9"
    assert events[-1].data == {"exit_code": 137, "oom_killed": False}


def test_death_without_start_gives_no_restart() -> None:
    events = container_events([raw("die", 0.0, exitCode="1")], "n")
    assert [e.kind for e in events] == ["docker_die"]
    assert events[0].data["exit_code"] == 1


def test_a_network_disconnect_dates_a_refuse_partition() -> None:
    """The harness confirms the cut only when Docker's API call returns (0.74 s later under
    load, CI run J): Docker's own ``disconnect`` event is when it happened."""
    from faultkit.model.records import Event
    from slo.effect import effect_of

    disconnect = {**raw("disconnect", 0.05, container="abc"), "Type": "network"}
    (event,) = container_events([disconnect], "n")
    assert (event.kind, event.t) == ("docker_network_disconnect", T + 0.05)
    spec = {"docker_actions": ["network_disconnect"], "required": "mechanism"}
    timeline = [
        Event(t=T, source="fault", kind="inject_start", node="n",
              data={"fault": "partition", "effect": spec}),
        Event(t=T + 0.01, source="fault", kind="act", node="n", data={"what": "disconnect"}),
        Event(t=T + 0.75, source="fault", kind="effect", node="n", data={"what": "cut"}),
        event,
    ]
    effect = effect_of(timeline, "n")
    assert (effect.t, effect.evidence, effect.gaps) == (T + 0.05, "docker_event", ())
    # without Docker's event the confirmation still dates it, as before
    assert effect_of(timeline[:3], "n").t == T + 0.75
    # the cut watch's observation outranks Docker's event, written when Docker's operation
    # ended (0.1 s after the cut idle, most of a second under load)
    observed = Event(t=T + 0.012, source="fault", kind="effect", node="n",
                     data={"evidence": "observed", "what": "the endpoint stopped answering"})
    effect = effect_of([*timeline, observed], "n")
    assert (effect.t, effect.evidence, effect.gaps) == (T + 0.012, "observed", ())
    assert effect.detail == "the endpoint stopped answering"


def test_partition_refuse_declares_the_disconnect_event() -> None:
    from faultkit.faults import make_fault
    from tests.unit.faults_fake import node

    target = node("n1", docker={"host": "unix:///var/run/docker.sock", "container": "n1"})
    refuse = make_fault("partition", target, dry_run=True, mode="refuse")
    assert refuse.effect_spec()["docker_actions"] == ["network_disconnect"]
    blackhole = make_fault("partition", target, dry_run=True, mode="blackhole")
    assert blackhole.effect_spec()["docker_actions"] == []
