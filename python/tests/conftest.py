"""Fixtures of the binding's tests: one `pomctl up` cluster per session in
a temporary folder (free ports: every daemon listens on port 0 and writes
the one it got), stopped with `pomctl down`; the package is imported from
the source tree.

Environment: POMCTL (default build/cli/pomctl of the repository) and
POMEGRANATE_LIB (default: the library next to it, build/client/).
"""

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))

POMCTL = os.path.abspath(os.environ.get("POMCTL") or os.path.join(REPO, "build/cli/pomctl"))
os.environ.setdefault("POMEGRANATE_LIB", os.path.join(
    os.path.dirname(os.path.dirname(POMCTL)), "client", "libpomegranate.so.0"))

import pomegranate  # noqa: E402  (after the path and the library are set)


class Cluster:
    def __init__(self, root):
        self.root = root
        self.data = os.path.join(root, "data")
        self.env = dict(os.environ, HOME=os.path.join(root, "home"))
        for k in ("POM_R2", "POM_BIN_DIR"):
            self.env.pop(k, None)
        os.makedirs(self.env["HOME"])

    def pomctl(self, *args):
        return subprocess.run([POMCTL, "--data", self.data, *args], env=self.env,
                              capture_output=True, text=True, timeout=120)

    @property
    def r2(self):
        with open(os.path.join(self.data, "r2.addr")) as f:
            return f.read().strip()

    @property
    def key(self):
        return os.path.join(self.data, "cluster.key")

    def mds_addr(self):
        with open(os.path.join(self.data, "run", "pom-mds.port")) as f:
            return "127.0.0.1:" + f.read().strip()


@pytest.fixture(scope="session")
def cluster():
    if not os.access(POMCTL, os.X_OK):
        pytest.fail(f"{POMCTL} is not built (set POMCTL)")
    root = tempfile.mkdtemp(prefix="pom-py.")
    c = Cluster(root)
    try:
        up = c.pomctl("up")
        if up.returncode != 0:
            pytest.fail(f"pomctl up failed ({up.returncode}): {up.stdout}{up.stderr}")
        yield c
    finally:
        down = c.pomctl("down")
        shutil.rmtree(root, ignore_errors=True)
        assert down.returncode == 0, down.stdout + down.stderr


@pytest.fixture
def fs(cluster):
    with pomegranate.open(cluster.r2, "pomfs", keyfile=cluster.key) as f:
        yield f


@pytest.fixture
def kv(fs, request):
    """A keyspace of its own per test."""
    with fs.keyspace("t-" + request.node.name) as k:
        yield k
