"""The local lab: Docker images, the llama.cpp node, simulated nodes, Prometheus.

This package must stay importable with the Python standard library alone: the simulated
node (``testbed.simnode``) runs from it inside a container that has only Debian's python3
and python3-aiohttp.
"""
