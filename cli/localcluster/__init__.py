"""`tessera up`'s machinery: the whole system on one machine, each component a supervised process.

`settings` (the flags as a value), `components` (each process, its flags and directory),
`supervisor` (restart with backoff), `state` (`DATA_DIR/up.json`), `cluster` (start order,
parallel starts, clean stop) and `demo` (the sample workload and its placement table). Only the
command line uses it: it imports every component, which only `cli/` may.
"""

from cli.localcluster.cluster import LocalCluster
from cli.localcluster.settings import UpSettings

__all__ = ["LocalCluster", "UpSettings"]
