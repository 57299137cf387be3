"""Guards of the harness's own process: its event loop, memory and garbage collector, the
machine lock, lazy imports and live progress lines."""
