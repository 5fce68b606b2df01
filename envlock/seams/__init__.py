"""Seams: one owner per outside system envlock talks to.

conda/ (py-rattler: solve, fetch, link, the package cache; its exceptions mapped there), pypi/ (the package index
and uv), net.py (HTTP), proc.py (every program started), activation/ (the shells), fs.py, beneath.py, filelocks.py and
gate.py (the filesystem: the one way to write, no write out of a root, file locks, untrusted names made paths), trust.py (sealed
cache entries), dirs.py, config.py and mirror_urls.py (where things are), prefix.py and envrecord.py (an env on
disk), installed_torch.py (the torch of a python), pkgcheck.py (a package archive's paths before linking).
Seams import the pure core, formats and the ground floor; never a use case.
"""
