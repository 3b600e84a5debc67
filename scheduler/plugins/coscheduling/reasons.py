"""Messages of Coscheduling. Every one names the gang (`gang team/train: …`), so a pod's condition,
`tessera explain` and what-if say which gang holds a pod back."""

#: A gang (or a gang of its group) has fewer members created than its min.
TOO_FEW_MEMBERS = "gang {gang}: {created} of {min} members created, min {min}"
#: The pod names a PodGroup that does not exist.
POD_GROUP_MISSING = "gang {gang}: PodGroup {gang} not found"
#: The pod names a scheduler-plugins PodGroup (`group` is its API group) that does not exist.
UPSTREAM_POD_GROUP_MISSING = "gang {gang}: PodGroup {gang} of {group} not found"
#: A Koordinator PodGroup and a scheduler-plugins one of the same name: the gang is ambiguous.
POD_GROUP_TWICE = "gang {gang}: a PodGroup {gang} exists in both {koordinator} and {upstream}; rename one"
#: A scheduler-plugins PodGroup's minResources do not fit in what the cluster has free.
MIN_RESOURCES = "gang {gang}: its PodGroup's minResources do not fit in the cluster's free resources: {gap}"
#: One resource short for minResources.
MIN_RESOURCES_GAP = "{resource} needs {needed}, {free} free"
#: A gang of the pod's group is not known at all (`groups` names a gang nobody created).
GROUP_GANG_MISSING = "gang {gang}: gang {other} of its group has no members"
#: The gang's min-available cannot be read: the gang cannot be formed.
INVALID_GANG = "gang {gang}: {problem}"
#: A Strict gang's cycle was failed by one member; the others are turned away until all were tried.
CYCLE_INVALID = "gang {gang}: rejected in scheduling cycle {cycle}: {cause}"
#: The member was already tried in this cycle of its gang.
ALREADY_TRIED = "gang {gang}: member already tried in scheduling cycle {cycle}"
#: Why a Strict gang's waiting members are turned away.
MEMBER_UNSCHEDULABLE = "member {pod} unschedulable: {reason}"
MEMBER_UNRESERVED = "member {pod} gave back its place: {reason}"
GROUP_REJECTED = "gang {gang} rejected: {cause}"
#: The state of a gang, as explain and what-if print it.
STATE = "gang {gang}: {waiting} of {total} members waiting at Permit, {bound} bound, min {min}"
