"""The operator's side: install and rollback, what is installed, doctor, verify, the fleet index."""

from __future__ import annotations

from . import cubins, doctor, doctor_launch, index, installed, jit_doctor
from .install import Step, Tool, install_steps, installed_from_facts, missing_wheels, rollback_steps, rollback_targets
from .installed import Finding
from .verify import verify_wheel, worst

__all__ = ["Finding", "Step", "Tool", "cubins", "doctor", "doctor_launch", "index", "install_steps", "installed",
           "installed_from_facts", "jit_doctor", "missing_wheels", "rollback_steps", "rollback_targets", "verify_wheel", "worst"]
