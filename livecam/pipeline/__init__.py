"""Pipeline: the stage protocol, the scheduler thread, slots and metrics."""
