"""The package list, found: every package under src/ and the two data packages pyproject.toml maps.

pyproject.toml's [tool.setuptools.packages.find] searches its `where` folders only, and patches/ and overlay/
are mapped into the package from outside src/ (package-dir), so the list is made here, where both can be named.
"""

from setuptools import find_packages, setup

setup(packages=[*find_packages("src"), "nvfp4_overlay.patches", "nvfp4_overlay.overlay"])
