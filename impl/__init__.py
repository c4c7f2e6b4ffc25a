"""Code under test: the paired buffer, the staging generations, the postprocess kernel.

Nothing here imports from ``oracles``: this package is what the oracles check.
"""
