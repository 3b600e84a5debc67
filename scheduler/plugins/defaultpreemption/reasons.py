"""DefaultPreemption's words, as kube-scheduler says them where it has words."""

from typing import Final

#: Before the reason a preemption failed: `preemption: 0/3 nodes are available: …`.
PREFIX: Final = "preemption: "
#: `Preemption.reason`: what the room is made for (in the Preempted/Preempting events).
ROOM_FOR: Final = "priority preemption"
