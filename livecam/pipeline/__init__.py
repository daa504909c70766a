"""The runtime: the scheduler thread(s), the stage chain and `App`, the threads of one run."""
