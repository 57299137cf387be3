"""Helper files of the real vLLM node: its PID-1 entrypoint and its model generator.

Both are mounted into / run for the container; neither imports faultkit.
"""
