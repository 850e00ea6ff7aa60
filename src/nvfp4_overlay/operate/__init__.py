"""The operator's side: install and rollback, what is installed, doctor, verify, the fleet index."""

from __future__ import annotations

from . import cubins, doctor, doctor_launch, index, installed, jit_doctor, rollback
from .install import Step, Tool, install_steps, missing_wheels
from .installed import Finding
from .verdict import Sums, worst
from .verify import verify_wheel

__all__ = ["Finding", "Step", "Sums", "Tool", "cubins", "doctor", "doctor_launch", "index", "install_steps", "installed",
           "jit_doctor", "missing_wheels", "rollback", "verify_wheel", "worst"]
