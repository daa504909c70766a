"""The bottom layer every other package imports: data types, errors, the stage protocol and
lifecycle, one-frame mailboxes, run metrics and control commands. It imports nothing else of
livecam (a test walks the imports and fails on an upward one)."""
