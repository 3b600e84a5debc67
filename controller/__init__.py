"""Tessera controller manager (imports apis, kube and proto only; never another component).

`run(ControllerSettings(...))` runs the process; `controller.runtime` is the framework every
controller is built on; `controller.noderesources` keeps Node device resources in line with the
Device CRs. See docs/user/controller.md.
"""

from controller.app import run
from controller.settings import ControllerSettings

__all__ = ["ControllerSettings", "run"]
