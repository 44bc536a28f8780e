"""Part VI diagrams: each renders with alt text and follows the serving model it draws."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from scaling_lib import inference, serving, transformer  # noqa: E402
from scaling_lib.course import diagrams as D  # noqa: E402
from scaling_lib.units import fmt_bytes  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _texts(ax):
    return "\n".join(t.get_text() for t in ax.texts) + ax.get_title()


@pytest.mark.parametrize("name", ["decode_reads", "chunked_prefill_timeline", "serving_layout",
                                  "disaggregated"])
def test_renders_with_alt_text(name):
    ax = getattr(D, name)()
    ax.figure.canvas.draw()
    alt = D.alt_text(ax.figure)
    assert len(alt.split()) >= 8 and ax.figure.get_facecolor()[:3] == (1.0, 1.0, 1.0)


def test_decode_reads_draws_the_librarys_bytes():
    ax = D.decode_reads("llama3-8b", batch=3, context=4096)
    kv = transformer.kv_cache_bytes("llama3-8b", 1, 4096)
    assert _texts(ax).count(fmt_bytes(kv)) == 3
    assert fmt_bytes(inference.weight_bytes_read("llama3-8b")) in _texts(ax)
    with pytest.raises(ValueError, match="1 to 8"):
        D.decode_reads(batch=9)


def test_chunked_timeline_uses_the_mixed_iteration():
    ax = D.chunked_prefill_timeline(prompt_len=2048, chunk_tokens=512)
    step = serving.mixed_step_parts("llama3-70b", "h100", 8, decode_batch=64, context=1152,
                                    prefill_tokens=512, prompt_len=2048)["time"]
    assert f"{float(step) * 1e3:.1f} ms per mixed iteration (4 of them)" in _texts(ax)


def test_layout_follows_tp_and_pp():
    ax = D.serving_layout("llama3-70b", "h100", tp=4, pp=2)
    t = _texts(ax)
    assert "layers 0-39" in t and "layers 40-79" in t and "tp=4" in t
    assert "81 all-reduces" in t and "80 all-reduces" in t  # 2L/pp, + the embedding's on stage 0
    with pytest.raises(ValueError, match="tp=3"):
        D.serving_layout("llama3-70b", tp=3)


def test_disaggregated_states_the_ratio():
    ax = D.disaggregated(prompt_len=2048, gen_len=512, batch=32)
    pre = serving.estimate("llama3-70b", "h100", 8, batch=1, prompt_len=2048, gen_len=512)
    dec = serving.estimate("llama3-70b", "h100", 8, batch=32, prompt_len=2048, gen_len=512)
    r = serving.prefill_decode_ratio(pre.ttft, dec.tpot, 32, 512)
    assert f"{float(r):.2f} prefill servers per decode server" in _texts(ax)
