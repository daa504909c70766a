"""Test helpers that ship with the package: recording backends, stand-in models, clips.

Nothing here is used at run time by the live pipeline.
"""
