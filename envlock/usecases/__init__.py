"""Use cases: what a user asks for, each one call from an adapter in commands/.

resolve/ (resolve, lock, update, check), create.py and update.py (install; an update is built beside the env and
swapped in), pack.py, unpack.py, mirror.py, channeldir.py (a local channel of some locks' packages), export/,
diff.py (`envlock diff`), pypi_lock.py (the PyPI part of a lock beside its conda part).
"""
