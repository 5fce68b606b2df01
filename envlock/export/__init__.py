"""Exports of a lock to other tools' formats.

  dockerfile.py   PURE: a lock's platform → the text of a multi-stage Dockerfile (and devcontainer.json)
  service.py      the use case: find and check the lock and its files, pick the bases, write the outputs

`envlock export dockerfile` (envlock/commands/export.py) is the adapter.
"""
