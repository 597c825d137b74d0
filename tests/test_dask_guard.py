"""The Dask tests' watchdog (tests/_dask_guard.py): a Dask test module that stalls, even
outside its tests' bodies, ends the run with every thread's stack instead of hanging CI."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

STALL = '''
import threading
import pytest

@pytest.fixture(scope="module")
def cluster():
    threading.Event().wait(300)     # as a cluster start or close that never returns
    yield

def test_uses_a_stuck_cluster(cluster):
    pass
'''


def test_a_stuck_module_fixture_ends_the_run_with_stacks(tmp_path):
    # was: the SIGALRM watchdog covered test bodies only; a stuck fixture hung the run
    (tmp_path / "test_dask_stall.py").write_text(textwrap.dedent(STALL))
    env = dict(os.environ, SPNC_DASK_TEST_TIMEOUT="3", PYTHONPATH=str(Path(__file__).parent))
    t0 = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "_dask_guard", "-p", "no:cacheprovider",
                          "-o", "faulthandler_timeout=0", str(tmp_path / "test_dask_stall.py")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert time.monotonic() - t0 < 60
    assert run.returncode != 0
    assert "Timeout" in run.stderr and "test_dask_stall.py" in run.stderr, run.stderr[-2000:]
