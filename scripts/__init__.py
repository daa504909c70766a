"""Benchmarks, judges and probes of the checkout (not shipped in the wheel).

Run each from the repository root as a module, ``python -m scripts.NAME [--help]``: Python then
finds ``livecam``, ``tests.helpers`` and the other scripts without any path set-up.
"""
