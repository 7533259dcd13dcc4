"""Where the fleet's records live in etcd, under the configured prefix.

``members/HOST/INSTANCE`` holds one registered instance (bound to its governor's lease);
``freeze/fleet`` freezes the whole fleet and ``freeze/group/GROUP`` one group (bound to no
lease: a freeze must outlive whoever set it, and ends at its own expiry); ``slots/GROUP/N`` is
restart slot N of a group's disruption budget (bound to the holder's lease);
``rollouts/GROUP/POLICY`` is a group change's rollout (bound to no lease: it outlives its
driver), ``rollout-drivers/GROUP/POLICY`` names the governor driving it (bound to that
governor's lease), and ``rollout-reports/GROUP/POLICY/HOST/INSTANCE`` is what a member's
governor did when the rollout asked, ``rollout-figures/GROUP/POLICY/HOST/INSTANCE`` its
server's counts over the canary's comparison window; ``rollout-lines/GROUP/POLICY/PROPOSAL/LINE``
says that a line of the rollout was posted in its proposal's Slack thread (bound to no lease:
a driver that resumes a dead one's rollout must not post it again);
``rollout-attempts/GROUP/POLICY/HOST/INSTANCE`` is the step a member's governor began,
written before it acts (restarted before it reported, it finds it there and never acts twice).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FleetKeys:
    """The keys of one fleet.

    Attributes:
        prefix: The fleet's root, starting and ending with ``/``.
    """

    prefix: str

    @property
    def members(self) -> str:
        """The prefix of every registered instance."""
        return f"{self.prefix}members/"

    def member(self, host: str, instance: str) -> str:
        """The key of ``instance`` on ``host``."""
        return f"{self.members}{host}/{instance}"

    @property
    def freezes(self) -> str:
        """The prefix of every fleet freeze."""
        return f"{self.prefix}freeze/"

    def freeze(self, group: str | None) -> str:
        """The key that freezes ``group``, or the whole fleet when ``group`` is None."""
        return f"{self.freezes}fleet" if group is None else f"{self.freezes}group/{group}"

    @property
    def all_slots(self) -> str:
        """The prefix of every restart slot of every group."""
        return f"{self.prefix}slots/"

    def slots(self, group: str) -> str:
        """The prefix of the restart slots of ``group``."""
        return f"{self.all_slots}{group}/"

    @property
    def all_rollouts(self) -> str:
        """The prefix of every group change's rollout."""
        return f"{self.prefix}rollouts/"

    def rollout(self, group: str, policy: str) -> str:
        """The key of the rollout of ``policy`` over ``group``."""
        return f"{self.all_rollouts}{group}/{policy}"

    @property
    def all_rollout_drivers(self) -> str:
        """The prefix of every rollout's driver key."""
        return f"{self.prefix}rollout-drivers/"

    def rollout_driver(self, group: str, policy: str) -> str:
        """The key that names the governor driving that rollout."""
        return f"{self.all_rollout_drivers}{group}/{policy}"

    def rollout_reports(self, group: str, policy: str) -> str:
        """The prefix of the members' reports to that rollout."""
        return f"{self.prefix}rollout-reports/{group}/{policy}/"

    def rollout_figures(self, group: str, policy: str) -> str:
        """The prefix of the members' counts over that rollout's comparison window."""
        return f"{self.prefix}rollout-figures/{group}/{policy}/"

    def rollout_lines(self, group: str, policy: str) -> str:
        """The prefix of the marks of that rollout's lines posted in its Slack thread."""
        return f"{self.prefix}rollout-lines/{group}/{policy}/"

    def rollout_attempts(self, group: str, policy: str) -> str:
        """The prefix of the steps the members' governors began in that rollout."""
        return f"{self.prefix}rollout-attempts/{group}/{policy}/"
