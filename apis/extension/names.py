"""Every resource name, label key and annotation key of the protocol, in one place.

Built from domain prefixes as Koordinator's `apis/extension/constants.go` does, so a reader sees
which family a key belongs to. No other module writes these strings as literals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# --- domains -------------------------------------------------------------------------------------
DOMAIN: Final = "koordinator.sh"
POD_DOMAIN: Final = "pod.koordinator.sh"
SCHEDULING_DOMAIN: Final = "scheduling.koordinator.sh"
NODE_DOMAIN: Final = "node.koordinator.sh"
GANG_DOMAIN: Final = "gang.scheduling.koordinator.sh"
QUOTA_DOMAIN: Final = "quota.scheduling.koordinator.sh"
RUNTIMEPROXY_DOMAIN: Final = "runtimeproxy.koordinator.sh"
SLO_DOMAIN: Final = "slo.koordinator.sh"
SIGS_SCHEDULING_GROUP: Final = "scheduling.sigs.k8s.io"
#: kubernetes-sigs/scheduler-plugins' API group (its Coscheduling's PodGroup): what Kubeflow's
#: training operator, KubeRay and others create when pointed at a coscheduling scheduler.
UPSTREAM_SCHEDULING_GROUP: Final = "scheduling.x-k8s.io"
#: Where Koordinator's device resources lived before v1.2 (`kubernetes.io/gpu-core`, ...).
DEPRECATED_RESOURCE_DOMAIN: Final = "kubernetes.io"
TESSERA_DOMAIN: Final = "tessera.dev"

# --- resource names ------------------------------------------------------------------------------
CPU: Final = "cpu"
MEMORY: Final = "memory"
PODS: Final = "pods"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"

NVIDIA_GPU: Final = "nvidia.com/gpu"
AMD_GPU: Final = "amd.com/gpu"
DCU_GPU: Final = "dcu.com/gpu"
#: Huawei Ascend vNPU resources, as Koordinator names them. Tessera schedules none of them; the
#: first is the default of DeviceShare's `gpuSharedResourceTemplatesConfig.matchedResources`.
HUAWEI_NPU_CORE: Final = "huawei.com/npu-core"

KOORD_GPU: Final = f"{DOMAIN}/gpu"
GPU_CORE: Final = f"{DOMAIN}/gpu-core"
GPU_MEMORY: Final = f"{DOMAIN}/gpu-memory"
GPU_MEMORY_RATIO: Final = f"{DOMAIN}/gpu-memory-ratio"
GPU_SHARED: Final = f"{DOMAIN}/gpu.shared"
RDMA: Final = f"{DOMAIN}/rdma"
FPGA: Final = f"{DOMAIN}/fpga"

BATCH_CPU: Final = "kubernetes.io/batch-cpu"
BATCH_MEMORY: Final = "kubernetes.io/batch-memory"
MID_CPU: Final = "kubernetes.io/mid-cpu"
MID_MEMORY: Final = "kubernetes.io/mid-memory"

# Koordinator's deprecated spellings of the device resources (its `apis/extension/deprecated.go`):
# what releases before v1.2, its design docs and many examples still use. Pods, Device CRs, Nodes
# and device-allocated annotations may carry them; `apis.extension.deprecated` reads each as the
# current name at the parse boundary, so nothing past it sees them. Which name each stands for,
# and every other fact of a device resource, is in `apis.extension.devicetypes.TABLE`.
DEPRECATED_KOORD_GPU: Final = f"{DEPRECATED_RESOURCE_DOMAIN}/gpu"
DEPRECATED_GPU_CORE: Final = f"{DEPRECATED_RESOURCE_DOMAIN}/gpu-core"
DEPRECATED_GPU_MEMORY: Final = f"{DEPRECATED_RESOURCE_DOMAIN}/gpu-memory"
DEPRECATED_GPU_MEMORY_RATIO: Final = f"{DEPRECATED_RESOURCE_DOMAIN}/gpu-memory-ratio"
DEPRECATED_RDMA: Final = f"{DEPRECATED_RESOURCE_DOMAIN}/rdma"
DEPRECATED_FPGA: Final = f"{DEPRECATED_RESOURCE_DOMAIN}/fpga"

#: Names measured in bytes, besides the devices' (`apis.extension.devicetypes.BYTE_RESOURCES`):
#: formatted as BinarySI (`16Gi`).
BYTE_RESOURCES: Final = frozenset({MEMORY, EPHEMERAL_STORAGE, BATCH_MEMORY, MID_MEMORY})
#: Names counted in thousandths in their integer form (Kubernetes' MilliValue).
MILLI_RESOURCES: Final = frozenset({CPU})

# --- annotations and labels on pods ---------------------------------------------------------------
ANNOTATION_DEVICE_ALLOCATED: Final = f"{SCHEDULING_DOMAIN}/device-allocated"
ANNOTATION_DEVICE_ALLOCATE_HINT: Final = f"{SCHEDULING_DOMAIN}/device-allocate-hint"
ANNOTATION_DEVICE_JOINT_ALLOCATE: Final = f"{SCHEDULING_DOMAIN}/device-joint-allocate"
#: On a pod: how it wants a GPU partition (`apis.extension.partitions.PartitionSpec`, JSON
#: `{"allocatePolicy":"Restricted"|"BestEffort","ringBusBandwidth":"<quantity>"}`); its presence
#: alone makes the node's partitions binding for the pod, whatever the node's policy.
ANNOTATION_GPU_PARTITION_SPEC: Final = f"{SCHEDULING_DOMAIN}/gpu-partition-spec"

LABEL_QOS_CLASS: Final = f"{DOMAIN}/qosClass"
LABEL_PRIORITY: Final = f"{DOMAIN}/priority"
LABEL_PRIORITY_CLASS: Final = f"{DOMAIN}/priority-class"

ANNOTATION_GANG_NAME: Final = f"{GANG_DOMAIN}/name"
ANNOTATION_GANG_MIN_AVAILABLE: Final = f"{GANG_DOMAIN}/min-available"
ANNOTATION_GANG_TOTAL_NUMBER: Final = f"{GANG_DOMAIN}/total-number"
ANNOTATION_GANG_MODE: Final = f"{GANG_DOMAIN}/mode"
ANNOTATION_GANG_WAITING_TIME: Final = f"{GANG_DOMAIN}/waiting-time"
ANNOTATION_GANG_GROUPS: Final = f"{GANG_DOMAIN}/groups"
LABEL_POD_GROUP: Final = f"pod-group.{SIGS_SCHEDULING_GROUP}"
#: The lightweight coscheduling labels of kubernetes-sigs/scheduler-plugins, still read by
#: Koordinator (deprecated there): the gang's name and its min, without a PodGroup CR. The name
#: label comes after the PodGroup label and before the name annotation; the min label wins over
#: the min-available annotation.
LABEL_LIGHTWEIGHT_GANG_NAME: Final = f"pod-group.{SIGS_SCHEDULING_GROUP}/name"
LABEL_LIGHTWEIGHT_GANG_MIN_AVAILABLE: Final = f"pod-group.{SIGS_SCHEDULING_GROUP}/min-available"
#: scheduler-plugins' pod label naming its PodGroup (`scheduling.x-k8s.io`) in the pod's namespace.
#: A pod carries it or one of Koordinator's gang names above, never both (`gang.gang_conflict`).
LABEL_UPSTREAM_POD_GROUP: Final = f"{UPSTREAM_SCHEDULING_GROUP}/pod-group"
#: `only-waiting | waiting-and-running | once-satisfied` (the default); the alias is read too.
ANNOTATION_GANG_MATCH_POLICY: Final = f"{GANG_DOMAIN}/match-policy"
ANNOTATION_ALIAS_GANG_MATCH_POLICY: Final = f"pod-group.{SIGS_SCHEDULING_GROUP}/match-policy"
#: Written by the scheduler's PreBind on every member of an allowed gang group.
ANNOTATION_BIND_GANG_GROUP_ID: Final = f"internal.{SCHEDULING_DOMAIN}/bind-gang-group-id"
ANNOTATION_BIND_GANG_MEMBER_COUNT: Final = f"internal.{SCHEDULING_DOMAIN}/bind-gang-member-count"
DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID: Final = f"{SCHEDULING_DOMAIN}/bind-gang-group-id"
DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT: Final = f"{SCHEDULING_DOMAIN}/bind-gang-member-count"

LABEL_QUOTA_NAME: Final = f"{QUOTA_DOMAIN}/name"
LABEL_QUOTA_PARENT: Final = f"{QUOTA_DOMAIN}/parent"
LABEL_QUOTA_IS_PARENT: Final = f"{QUOTA_DOMAIN}/is-parent"
LABEL_QUOTA_ALLOW_LENT_RESOURCE: Final = f"{QUOTA_DOMAIN}/allow-lent-resource"
LABEL_QUOTA_PREEMPTIBLE: Final = f"{QUOTA_DOMAIN}/preemptible"
ANNOTATION_QUOTA_SHARED_WEIGHT: Final = f"{QUOTA_DOMAIN}/shared-weight"
#: The namespaces whose pods use the quota (JSON list).
ANNOTATION_QUOTA_NAMESPACES: Final = f"{QUOTA_DOMAIN}/namespaces"
ANNOTATION_QUOTA_RUNTIME: Final = f"{QUOTA_DOMAIN}/runtime"
ANNOTATION_QUOTA_REQUEST: Final = f"{QUOTA_DOMAIN}/request"
ANNOTATION_QUOTA_GUARANTEED: Final = f"{QUOTA_DOMAIN}/guaranteed"
ANNOTATION_QUOTA_ALLOCATED: Final = f"{QUOTA_DOMAIN}/allocated"
ANNOTATION_QUOTA_NON_PREEMPTIBLE_USED: Final = f"{QUOTA_DOMAIN}/non-preemptible-used"
#: Tessera's own, on any ElasticQuota: an operator's word (an RFC 3339 time, `tessera quota
#: --resume-reclaim` writes it) that quota reclaim, paused by its circuit breaker before that
#: time, may evict again.
ANNOTATION_QUOTA_RESUME_RECLAIM: Final = f"{TESSERA_DOMAIN}/resume-quota-reclaim"
#: Tessera's own, on a pod with ResourceClaims: what its claims' allocations charge its
#: ElasticQuota, in quota names (a JSON ResourceList, `apis.dra.quota`). Written by the scheduler
#: with the binding; the scheduler's and the controller's quota accounts read it.
ANNOTATION_CLAIMS_QUOTA_CHARGE: Final = f"{TESSERA_DOMAIN}/claims-quota-charge"

LABEL_SKIP_HOOKSERVER: Final = f"{RUNTIMEPROXY_DOMAIN}/skip-hookserver"

# --- reservations and migration (Koordinator's apis/extension/reservation.go) ---------------------
#: On a pod placed onto a Reservation's resources: `{"name": ..., "uid": ...}`.
ANNOTATION_RESERVATION_ALLOCATED: Final = f"{SCHEDULING_DOMAIN}/reservation-allocated"
#: On a pod: only these Reservations (by name or label selector) may take it.
ANNOTATION_RESERVATION_AFFINITY: Final = f"{SCHEDULING_DOMAIN}/reservation-affinity"
#: `"true"` on a pod: never place it onto a Reservation, even one whose owners it matches.
LABEL_RESERVATION_IGNORED: Final = f"{SCHEDULING_DOMAIN}/reservation-ignored"
#: On a Reservation: among those a pod may use, the lowest positive order is taken first (0 or
#: not a number: no order, the tightest fit is taken).
LABEL_RESERVATION_ORDER: Final = f"{SCHEDULING_DOMAIN}/reservation-order"
#: On a Reservation with `allocatePolicy: Restricted`: `{"resources": [...]}`, the reserved
#: resources an owner may take only from the Reservation (none given, or none reserved: all).
ANNOTATION_RESERVATION_RESTRICTED_OPTIONS: Final = f"{SCHEDULING_DOMAIN}/reservation-restricted-options"
#: On a pod: `{"resourceNames": [...]}`, resources whose request must equal what a Reservation
#: reserves for the pod to use it.
ANNOTATION_EXACT_MATCH_RESERVATION: Final = f"{SCHEDULING_DOMAIN}/exact-match-reservation"
#: `"true"` on a Reservation with `spec.preAllocation`: it is placed only where it can take over
#: running pods' resources (pre-allocate), never on free room alone.
LABEL_PRE_ALLOCATION_REQUIRED: Final = f"{SCHEDULING_DOMAIN}/pre-allocation-required"
#: `"true"` on a pod: a Reservation in pre-allocation mode `Cluster` may take over its resources.
LABEL_POD_PRE_ALLOCATABLE: Final = f"{POD_DOMAIN}/is-pre-allocatable"
#: On a pre-allocatable pod: a number, higher first when a `Cluster` mode Reservation chooses.
ANNOTATION_POD_PRE_ALLOCATABLE_PRIORITY: Final = f"{POD_DOMAIN}/pre-allocatable-priority"
#: Tessera's own, on a Reservation the scheduler placed by pre-allocation: the running pods whose
#: resources became its own (JSON list of `{"namespace", "name", "uid"}`). Those pods carry the
#: Reservation in their `reservation-allocated` annotation, as its owners do, but they do not
#: consume an allocateOnce one: when they go, what they had is held for the owners.
ANNOTATION_PRE_ALLOCATED: Final = f"{TESSERA_DOMAIN}/pre-allocated"
#: On a Reservation or PodMigrationJob a descheduler created: the pod it migrates (`ns/name`).
ANNOTATION_MIGRATION_POD: Final = f"{TESSERA_DOMAIN}/migration-pod"
#: On a Reservation a descheduler created for a PodMigrationJob: the job's name (so a Reservation
#: whose job is gone is found and rolled back).
LABEL_MIGRATION_JOB: Final = f"{TESSERA_DOMAIN}/migration-job"
#: On a PodMigrationJob a strategy created: the uid of the pending pod it makes room for (one
#: plan per pending pod at a time).
LABEL_MIGRATION_FOR: Final = f"{TESSERA_DOMAIN}/migration-for"
#: On a PodMigrationJob: the node its replacement must be reserved on (a planner's `to_node`).
ANNOTATION_MIGRATION_TARGET_NODE: Final = f"{TESSERA_DOMAIN}/migration-target-node"
#: On a PodMigrationJob: why it was created (the strategy and the pending pod it frees room for).
ANNOTATION_MIGRATION_REASON: Final = f"{TESSERA_DOMAIN}/migration-reason"

# --- node and device labels -----------------------------------------------------------------------
LABEL_GPU_VENDOR: Final = f"{NODE_DOMAIN}/gpu-vendor"
LABEL_GPU_MODEL: Final = f"{NODE_DOMAIN}/gpu-model"
LABEL_GPU_DRIVER_VERSION: Final = f"{NODE_DOMAIN}/gpu-driver-version"
#: The `vendor` label value (and Koordinator's `GPUVendorNVIDIA`) of NVIDIA GPUs.
GPU_VENDOR_NVIDIA: Final = "nvidia"
#: On a Device (with its `ANNOTATION_GPU_PARTITIONS`) or, for the built-in table, on a Node:
#: `Honor` (multi-GPU pods get a partition of the table or nothing) or `Prefer` (a partition when
#: one is free; any other value reads as `Prefer`, as in Koordinator).
LABEL_GPU_PARTITION_POLICY: Final = f"{NODE_DOMAIN}/gpu-partition-policy"
#: On a Device: the sets of GPUs the node permits one pod to have, as JSON
#: `{"<gpu count>": [{"minors": [...], "gpuLinkType": "NVLink", "ringBusBandwidth": "<quantity>",
#: "allocationScore": <int>}, ...]}` (`apis.extension.partitions.PartitionTable`).
ANNOTATION_GPU_PARTITIONS: Final = f"{SCHEDULING_DOMAIN}/gpu-partitions"
#: Koordinator's names for the model and driver labels before v1.2. Koordinator still defines
#: them but reads neither; Tessera reads a node's model from here when `LABEL_GPU_MODEL` is
#: absent (a node labelled by a pre-v1.2 manager), and never writes them.
DEPRECATED_LABEL_GPU_MODEL: Final = f"{DEPRECATED_RESOURCE_DOMAIN}/gpu-model"
DEPRECATED_LABEL_GPU_DRIVER: Final = f"{DEPRECATED_RESOURCE_DOMAIN}/gpu-driver"
#: On a pod: the GPU isolation layer its GPU share must be enforced by; on a Node: the one the
#: node has installed. A shared-GPU pod goes only to a node with the same value, and the node's
#: runtime hook sets the pod's containers up for it (`GPU_ISOLATION_PROVIDER_HAMI_CORE`).
LABEL_GPU_ISOLATION_PROVIDER: Final = f"{DOMAIN}/gpu-isolation-provider"
#: The one provider Koordinator knows: HAMi-core's libvgpu.so, preloaded into the container.
GPU_ISOLATION_PROVIDER_HAMI_CORE: Final = "HAMi-core"
#: Marks objects whose devices are simulated (no real hardware behind them).
LABEL_SIMULATED: Final = f"{TESSERA_DOMAIN}/simulated"
#: On a Device CR: which GPUs NVLink joins, as JSON `{"<minor>": [<peer minors>], ...}`. Tessera's
#: own: Koordinator's Device has no interconnect field, and its readers ignore unknown annotations.
ANNOTATION_GPU_NVLINK_PEERS: Final = f"{TESSERA_DOMAIN}/gpu-nvlink-peers"

# --- well-known Kubernetes labels and namespaces (kubelet sets them on its Node) -----------------
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_OS: Final = "kubernetes.io/os"
LABEL_ARCH: Final = "kubernetes.io/arch"
#: Where kubelets keep their heartbeat Leases (one per node, named after it).
NAMESPACE_NODE_LEASE: Final = "kube-node-lease"
#: Marks Nodes whose kubelet is simulated by the agent (`tessera agent --simulate-kubelet`).
LABEL_SIMULATED_KUBELET: Final = f"{TESSERA_DOMAIN}/simulated-kubelet"
#: On a pod that a simulated kubelet runs: how long its containers run before they exit (a number
#: of seconds; "never" keeps them running), and with which exit code (default 0). A pod of
#: restartPolicy Never or OnFailure (a Job's) exits after 5 s unless this says otherwise.
ANNOTATION_SIMULATED_RUN_SECONDS: Final = f"{TESSERA_DOMAIN}/simulated-run-seconds"
ANNOTATION_SIMULATED_EXIT_CODE: Final = f"{TESSERA_DOMAIN}/simulated-exit-code"

# --- Kubernetes taints the scheduler honours -----------------------------------------------------
TAINT_NODE_UNSCHEDULABLE: Final = "node.kubernetes.io/unschedulable"
TAINT_EFFECT_NO_SCHEDULE: Final = "NoSchedule"
TAINT_EFFECT_PREFER_NO_SCHEDULE: Final = "PreferNoSchedule"
TAINT_EFFECT_NO_EXECUTE: Final = "NoExecute"
#: The node lifecycle controller's taints: the node's Ready condition is False / Unknown (its
#: kubelet stopped posting status). Both come as NoSchedule and NoExecute.
TAINT_NODE_NOT_READY: Final = "node.kubernetes.io/not-ready"
TAINT_NODE_UNREACHABLE: Final = "node.kubernetes.io/unreachable"
#: The node conditions the DaemonSet controller tolerates for its pods (kube's
#: AddOrUpdateDaemonPodTolerations): a node agent must run through pressure and while unschedulable.
TAINT_NODE_DISK_PRESSURE: Final = "node.kubernetes.io/disk-pressure"
TAINT_NODE_MEMORY_PRESSURE: Final = "node.kubernetes.io/memory-pressure"
TAINT_NODE_PID_PRESSURE: Final = "node.kubernetes.io/pid-pressure"
TAINT_NODE_NETWORK_UNAVAILABLE: Final = "node.kubernetes.io/network-unavailable"

# --- Kubernetes workload labels and annotations (kube-controller-manager writes them) ------------
#: On a workload's pods: the revision of the template they were made from (StatefulSet, DaemonSet).
LABEL_CONTROLLER_REVISION_HASH: Final = "controller-revision-hash"
#: On a DaemonSet's pods: the DaemonSet's metadata.generation they were made from.
LABEL_POD_TEMPLATE_GENERATION: Final = "pod-template-generation"
#: On an Indexed Job's pods, as annotation and label: the pod's completion index (its rank).
JOB_COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
#: The environment variable an Indexed Job's containers read their index from (downward API).
ENV_JOB_COMPLETION_INDEX: Final = "JOB_COMPLETION_INDEX"
#: On a CronJob's Jobs: when the run was scheduled (RFC 3339).
ANNOTATION_CRONJOB_SCHEDULED_TIMESTAMP: Final = "batch.kubernetes.io/cronjob-scheduled-timestamp"

# --- well-known labels and annotations of tools that own objects ---------------------------------
#: Who manages an object (`Helm`, `tessera-up`): Kubernetes' recommended label.
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
#: Helm's mark on every object of a release: which release owns it (an object without it is not
#: Helm's, and `helm install` refuses to take it over).
ANNOTATION_HELM_RELEASE_NAME: Final = "meta.helm.sh/release-name"
#: What `kubectl apply` (client-side) last applied to an object.
ANNOTATION_KUBECTL_LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
#: On a Job that `kubectl create job --from=cronjob/NAME` made: `manual`.
ANNOTATION_CRONJOB_INSTANTIATE: Final = "cronjob.kubernetes.io/instantiate"

#: kube-apiserver's DefaultTolerationSeconds: how long a pod that says nothing about them
#: tolerates the two NoExecute taints above before it is evicted.
DEFAULT_TOLERATION_SECONDS: Final = 300

# --- Tessera's own --------------------------------------------------------------------------------
SCHEDULER_NAME: Final = "tessera-scheduler"
#: Koordinator's scheduler, as its manuals' examples name it: `tessera up` serves it too, so they
#: run verbatim.
KOORD_SCHEDULER_NAME: Final = "koord-scheduler"
CONDITION_HEALTHY: Final = "Healthy"


@dataclass(frozen=True, slots=True)
class GroupVersionResource:
    """How a resource is addressed over REST (`namespaced` says which URL shape it uses), its kind,
    and whether it serves a `status` subresource as Tessera ships it (a CRD of a cluster may
    differ: `kube.status.StatusWriter` asks). Every resource Tessera uses is declared once — the
    CRDs here (the protocol names them), the built-in kinds in `kube.resources` — and listed in
    `kube.catalogue`."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


# Tessera's CRDs (deploy/crds/), as Koordinator ships them: Device, ElasticQuota and PodGroup keep
# status in the object (no status subresource), the newer kinds have one.
DEVICES: Final = GroupVersionResource(SCHEDULING_DOMAIN, "v1alpha1", "devices", "Device", False)
ELASTIC_QUOTAS: Final = GroupVersionResource(SIGS_SCHEDULING_GROUP, "v1alpha1", "elasticquotas", "ElasticQuota", True)
POD_GROUPS: Final = GroupVersionResource(SIGS_SCHEDULING_GROUP, "v1alpha1", "podgroups", "PodGroup", True)
#: scheduler-plugins' PodGroup (deploy/crds-optional/): the same spec as Koordinator's, its own
#: status and semantics, and a status subresource as that project ships it.
UPSTREAM_POD_GROUPS: Final = GroupVersionResource(
    UPSTREAM_SCHEDULING_GROUP, "v1alpha1", "podgroups", "PodGroup", True, True
)
RESERVATIONS: Final = GroupVersionResource(SCHEDULING_DOMAIN, "v1alpha1", "reservations", "Reservation", False, True)
POD_MIGRATION_JOBS: Final = GroupVersionResource(
    SCHEDULING_DOMAIN, "v1alpha1", "podmigrationjobs", "PodMigrationJob", False, True
)
#: One per node, named after it: the node's QoS configuration (Koordinator's slo-controller writes it).
NODE_SLOS: Final = GroupVersionResource(SLO_DOMAIN, "v1alpha1", "nodeslos", "NodeSLO", False, True)
#: A built-in kind Koordinator's protocol keeps data in (DeviceShare's GPU shared-resource
#: templates), declared here rather than in `kube.resources` (which re-exports it) because the
#: scheduling core, which may not import `kube`, watches it.
CONFIG_MAPS: Final = GroupVersionResource("", "v1", "configmaps", "ConfigMap", True)
#: Pods, declared here for the same reason (`kube.resources.PODS`; `PODS` here is the resource
#: name): the scheduling core's plugins say what is wrong on a pod, with its kind and apiVersion.
CORE_PODS: Final = GroupVersionResource("", "v1", "pods", "Pod", True, True)
