"""The `recording` fixture the fidelity tests share (test_fidelity*.py)."""
import pytest

import transforms as T


@pytest.fixture(params=[None, False, True], ids=["outside", "recorded", "with_stages"])
def recording(request):
    """Runs the test outside any record() block, then inside one, without and with stages."""
    if request.param is not None:
        with T.record(stages=request.param) as session:
            yield session
    else:
        yield None
