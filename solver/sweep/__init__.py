"""Scaling sweeps: each point a normal `stencil run` in its own process; tables and notes. Imports results,
bench and below.
"""
