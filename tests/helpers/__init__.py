"""Test helpers, not shipped in the wheel: recording backends, stand-in models, clips, the
leak judge. Tests and benchmarks (``scripts/``, run with the checkout on ``PYTHONPATH``) use
them; ``livecam demo`` builds its clip with :mod:`livecam.subcommands.demo_sprites`.
"""
