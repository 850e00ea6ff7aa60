"""Probes: scripts run in a child interpreter (torch imported there, never here) over unpacked wheels.

Each reads a JSON plan on stdin and prints one JSON document; oracle/behaviour.py runs them and judges
what they print. They fork a child per wheel tree (and per cell where a cell changes import-time
state), so one interpreter imports torch once for a whole batch of releases.
"""
