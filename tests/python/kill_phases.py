"""The marker protocol the leader-kill scripts share with their Rust driver
(`python_through_a_leader_kill` in tests/tests/cluster.rs): the script creates
MARKER.half once HALF records are acknowledged; the driver then kills the
partition's leader and creates MARKER.killed; the script stops producing once AFTER
more records are acknowledged after that.
"""

import os

HALF = 200
AFTER = 200


class KillPhases:
    def __init__(self, marker):
        self.marker = marker
        # Records acknowledged when the script first saw MARKER.killed.
        self.acked_at_kill = None

    def done(self, acked):
        """Advances the protocol with `acked` records acknowledged so far; True once
        AFTER more were acknowledged after the kill."""
        if acked >= HALF and not os.path.exists(self.marker + ".half"):
            open(self.marker + ".half", "w").close()
        if self.acked_at_kill is None and os.path.exists(self.marker + ".killed"):
            self.acked_at_kill = acked
        return self.acked_at_kill is not None and acked >= self.acked_at_kill + AFTER
