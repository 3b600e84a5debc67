"""The workload controllers of the embedded cluster: `tessera kube-controller-manager`.

In a real cluster kube-controller-manager runs the ReplicaSet, Deployment, StatefulSet, DaemonSet,
Job, CronJob, TTL-after-finished, disruption, garbage-collector and node lifecycle controllers, and
Tessera runs none of them. `tessera up` has no
kube-controller-manager, so this package stands in for it there, as its own supervised process:
the same split as a cluster, so Tessera's own controller (`controller/`) never carries what is
Kubernetes' job, and restarting or killing one does not touch the other.

Each controller is a pure decision over cached objects (`replicaset.py`, `deployment.py`,
`statefulset.py`, `daemonset.py`, `job.py` (with `podfailurepolicy.py`, `ttlafterfinished.py`),
`cronjob.py`, `disruption.py`, `garbagecollector.py`, `nodelifecycle.py`: objects
in, a `Plan` of writes out); `loop.py` feeds them from informers and performs their plans; `app.py` wires the
process. They are faithful to upstream for what they cover, and each module says what it leaves out.
"""

from kubecontrollers.app import run
from kubecontrollers.settings import KubeControllersSettings

__all__ = ["KubeControllersSettings", "run"]
