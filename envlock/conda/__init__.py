"""The rattler seam: the only place envlock imports py-rattler (0.28.0, pinned; DESIGN.md's known traps).

    solve.py     Gateway + one solve per platform (RattlerSolver), the conda-forge pytorch lookup
    why.py       why a candidate failed, asked of the channel (extras.py: which `--with` extra lacks a build)
    channels.py  channel URLs: canonical form, mirrors, the security and scheme checks (no rattler)
    client.py    rattler's HTTP client from envlock.net's settings (timeout, retries, CA bundle)
    errors.py    ONE map of rattler's exceptions to EnvlockErrors
    fetch.py     an archive fetched through envlock.net and checked against the lock's sha256
    cache.py     the package cache: verified entries, extracted, in rattler's cache format
    install.py   link a prefix from the cache (rattler.install)
    index.py     rattler's indexer over a local channel (envlock pack / mirror)

Importing this package imports nothing of rattler: each module that needs it imports it itself, so only
the commands that solve or install pay for it.
"""
