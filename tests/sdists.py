"""Real projects' sdists from the package index the user's pip is configured with (envlock.seams.pypi.pipconf;
no index host is named here), checked against the sha256 the index gives.

`pip download --no-binary :all:` cannot fetch most CUDA-extension sdists without torch: it runs their
setup.py to read the metadata, and their setup.py imports torch. Reading the index's PEP 691 JSON page and
downloading the file is what pip does before that step.

    python -m tests.sdists DIR nerfacc==0.5.3 warp-rnnt==0.7.0 ...
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

#: The projects of the H200 record (docs/gpu-proof/<date>-extensions.json) and the slow tests.
PROJECTS = ("deepspeed==0.19.8", "chamferdist==1.0.3", "warp-rnnt==0.7.0", "nerfacc==0.5.3", "torch-cluster==1.6.3")


def fetch_sdist(requirement: str, dest: Path, timeout: float = 120) -> Path:
    """Download NAME==VERSION's sdist into dest (kept when already there with the index's hash)."""
    import requests

    from envlock.seams.pypi.pipconf import configured_extra_index_urls, configured_index_url
    from tests.pipenv import user_pip_environ  # the user's pip settings, not the tests' loopback index

    name, version = requirement.split("==")
    norm = re.sub(r"[-_.]+", "-", name).lower()
    env = user_pip_environ()
    indexes = [configured_index_url(env)[0], *configured_extra_index_urls(env)[0]]
    for index in indexes:
        if not index.startswith(("http://", "https://")):
            continue
        r = requests.get(f"{index.rstrip('/')}/{norm}/", timeout=timeout,
                         headers={"Accept": "application/vnd.pypi.simple.v1+json"})  # fmt: skip
        if r.status_code != 200 or "json" not in r.headers.get("Content-Type", ""):
            continue
        pattern = re.compile("[-_.]+".join(map(re.escape, norm.split("-"))) + "-" + re.escape(version) + r"\.(tar\.gz|zip)$", re.I)
        for f in r.json().get("files", []):
            fn = f["filename"]
            if pattern.match(fn):
                want = f.get("hashes", {}).get("sha256")
                out = dest / fn
                if out.is_file() and hashlib.sha256(out.read_bytes()).hexdigest() == want:
                    return out
                data = requests.get(f["url"], timeout=timeout).content
                if want and hashlib.sha256(data).hexdigest() != want:
                    raise RuntimeError(f"{fn}: sha256 differs from the index's")
                dest.mkdir(parents=True, exist_ok=True)
                out.write_bytes(data)
                return out
    raise LookupError(f"no sdist of {requirement} on the configured index")


if __name__ == "__main__":
    target = Path(sys.argv[1])
    for req in sys.argv[2:] or PROJECTS:
        print(fetch_sdist(req, target))
