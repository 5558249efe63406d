"""Importing the pure parts of weir.coordination, and TopicAdmin (weir.server.topic_admin), does
not load the ZooKeeper client (the import-linter contract ``coordination-pure`` checks the same
statically)."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["weir.coordination", "weir.coordination.codecs",
                                    "weir.coordination.paths",
                                    "weir.server.topic_admin"])
def test_pure_modules_do_not_import_kazoo(module: str) -> None:
    code = (f"import sys, {module}; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'kazoo' "
            "or m in ('weir.coordination.zk', 'weir.coordination.multi_read')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_the_client_does_import_kazoo() -> None:
    """The check above can fail: the client module does load kazoo."""
    code = "import sys, weir.coordination.zk; print('kazoo.client' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "True"
