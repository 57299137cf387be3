"""Reading how many packets a fault's iptables rules matched (the blackhole's evidence)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

import pytest

from faultkit.platform import netns

# real `iptables -L -v -x -n` output: its rule lines are wider than our line limit
LISTING = """Chain INPUT (policy ACCEPT 0 packets, 0 bytes)
    pkts      bytes target     prot opt in     out     source               destination
      37     2220 DROP       all  --  !lo    *       0.0.0.0/0            0.0.0.0/0            /* faultkit:partition-a-1 */
       5      300 DROP       all  --  !lo    *       0.0.0.0/0            0.0.0.0/0            /* faultkit:partition-b-2 */

Chain OUTPUT (policy ACCEPT 0 packets, 0 bytes)
    pkts      bytes target     prot opt in     out     source               destination
       4      640 DROP       all  --  *      !lo     0.0.0.0/0            0.0.0.0/0            /* faultkit:partition-a-1 */
"""  # noqa: E501


def test_matched_packets_sums_only_this_faults_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Sequence[str]] = []

    def fake(pid: int | None, args: Sequence[str], *, check: bool = True
             ) -> subprocess.CompletedProcess[str]:
        seen.append(args)
        return subprocess.CompletedProcess(args, 0, stdout=LISTING, stderr="")

    monkeypatch.setattr(netns, "iptables", fake)
    assert netns.matched_packets(123, "filter", "faultkit:partition-a-1") == 41
    assert netns.matched_packets(123, "filter", "faultkit:partition-c-3") == 0
    assert list(seen[0]) == ["-t", "filter", "-L", "-v", "-x", "-n"]
