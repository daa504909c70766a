"""Control: commands and their sources (hotkeys, the local API, signals)."""
