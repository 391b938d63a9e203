"""A 1 ms Python handler (bench/pythonHandler.ts), for the python: kind and the HTTP sidecar."""

import time


def handle(job, ctx):
    time.sleep(0.001)
    return None
