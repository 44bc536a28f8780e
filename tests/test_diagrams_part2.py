"""Part II diagrams (scaling_lib.course.diagrams.part2): each renders, carries alt text, and shows
the library's numbers for the object it draws."""

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from scaling_lib import inference, memory, transformer  # noqa: E402
from scaling_lib.course import diagrams as D  # noqa: E402
from scaling_lib.parallelism import ParallelPlan  # noqa: E402
from scaling_lib.units import fmt_bytes, fmt_flops  # noqa: E402

CALLS = {
    "backward_matmuls": lambda: D.backward_matmuls("llama3-8b", 4096),
    "flash_attention_tiles": lambda: D.flash_attention_tiles("llama3-8b", 8192, 1024),
    "grad_accumulation": lambda: D.grad_accumulation("llama3-8b", 64, 4),
    "mfu_ledger": lambda: D.mfu_ledger("llama3-70b", 8192),
    "batched_decode_reads": lambda: D.batched_decode_reads("llama3-70b", 4, 8192),
}


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _texts(ax):
    return "\n".join([t.get_text() for t in ax.texts] + [ax.get_title()])


@pytest.mark.parametrize("name", sorted(CALLS))
def test_renders_with_alt_text(name):
    ax = CALLS[name]()
    ax.figure.canvas.draw()
    alt = D.alt_text(ax.figure)
    assert len(alt.split()) >= 8, alt


def test_backward_matmuls_shows_the_library_flops():
    ax = D.backward_matmuls("llama3-8b", 4096)
    f = transformer.einsum_flops("td,df->tf", (4096, 4096), (4096, 14336))
    assert fmt_flops(f) in _texts(ax) and fmt_flops(2 * f) in _texts(ax)


def test_flash_tiles_follow_attention_hbm_bytes():
    ax = D.flash_attention_tiles("llama3-8b", 4096, 512)
    t = _texts(ax)
    assert fmt_bytes(transformer.attention_hbm_bytes("llama3-8b", 1, 4096, flash=False)) in t
    assert fmt_bytes(transformer.attention_hbm_bytes("llama3-8b", 1, 4096, block=512)) in t
    with pytest.raises(ValueError, match="blocks per side"):
        D.flash_attention_tiles("llama3-8b", 8192, 128)


def test_grad_accumulation_counts_reduce_scatters_and_the_accumulator():
    ax = D.grad_accumulation("llama3-8b", 64, 3)
    t = _texts(ax)
    acc = memory.training_memory("llama3-8b", ParallelPlan(dp=64, zero=3), 192, 8192,
                                 grad_accumulation="unsharded")["gradient accumulator"]
    assert "3 × RS" in t and "1 × RS" in t and fmt_bytes(acc) in t


def test_mfu_ledger_mfu_follows_throughput():
    ax = D.mfu_ledger("llama3-70b", 8192, tokens_per_s=None)
    assert "MFU 40%" in _texts(ax)
    with pytest.raises(ValueError, match="tokens_per_s"):
        D.mfu_ledger("llama3-70b", 8192, tokens_per_s=1e9)


def test_decode_reads_shows_weights_and_one_cache():
    ax = D.batched_decode_reads("llama3-70b", 2, 8192)
    b = inference.decode_bytes("llama3-70b", 2, 8192)
    t = _texts(ax)
    assert fmt_bytes(b["weights"]) in t and fmt_bytes(b["kv cache"] / 2) in t
