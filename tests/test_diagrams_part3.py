"""Part III's diagrams (course.diagrams.part3): they render, follow the library, carry alt text."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from scaling_lib import collectives as C  # noqa: E402
from scaling_lib import hardware, sharding  # noqa: E402
from scaling_lib.course import diagrams as D  # noqa: E402
from scaling_lib.parallelism import timeline  # noqa: E402


def texts(ax):
    return " ".join([t.get_text() for t in ax.texts] + [ax.get_title()])


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_collective_matmul_rows_are_steps_and_blocks_rotate():
    ax = D.collective_matmul(4, 64, 64, 32)
    m = sharding.sharded_matmul(64, 64, 32, ("X", None), ("X", None), {"X": 4})
    t = texts(ax)
    assert "3 ppermute steps" in t and D.alt_text(ax)
    from scaling_lib.units import fmt_bytes
    assert fmt_bytes(m.nbytes / 4) in t
    # device 1 at step 3 holds block (1 + 3) mod 4 = 0
    assert sum("B0\n" in x.get_text() for x in ax.texts) == 4
    with pytest.raises(ValueError):
        D.collective_matmul(1)


def test_all_to_all_reshard_sends_what_the_library_says():
    ax = D.all_to_all_reshard(4, 1024, 512)
    from scaling_lib.units import fmt_bytes
    sent = C.collective_bytes("all-to-all", 1024 * 512 * 2, 4).sent_bytes
    assert fmt_bytes(sent) in texts(ax) and "keeps" in texts(ax) and D.alt_text(ax)


def test_async_trace_waits_match_the_fsdp_timeline():
    c = hardware.cluster("h100", 64)
    ax = D.async_trace("llama3-8b", c, 64, 2048, 2048, n_layers=4)
    ev = timeline.fsdp_timeline("llama3-8b", c, 64, 2048, 2048, n_layers=4)
    comp = [e for e in ev if e[0] == "compute" and e[1].startswith("forward")]
    waited = sum(max(0.0, b[2] - a[3]) for a, b in zip([("", "", 0, 0)] + comp, comp))
    from scaling_lib.units import fmt_seconds
    assert fmt_seconds(waited) in ax.get_title()
    assert "gather L3" in texts(ax) and "all-gather-done" in D.alt_text(ax)
