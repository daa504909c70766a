"""Headless daemon support: device locks and the signal-driven service loop."""
