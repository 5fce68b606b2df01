"""Exports of a lock to other tools' formats.

  dockerfile.py   PURE: a lock's platform → the text of a multi-stage Dockerfile (and devcontainer.json)
  service.py      the use case: find and check the lock and its files, pick the bases, write the outputs
  explicit.py     `export explicit --mirror`: the lock's @EXPLICIT files with every URL on a mirror, for plain conda

`envlock export dockerfile|explicit` (envlock/commands/export.py) are the adapters.
"""
