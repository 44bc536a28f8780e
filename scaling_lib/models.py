"""Model shapes: the "what" of every estimate.

A :class:`TransformerConfig` holds the few integers that fix a decoder-only transformer's cost,
in the book's notation: L layers, width D, MLP width F, N query heads, K key/value heads, head
dimension H, vocabulary V, and for a mixture of experts E experts of which k are active per token.
Presets are built from the published configs (each cites its source); :func:`from_hf_config`
reads a Hugging Face ``config.json``.

See: Chapter 5, "Counting FLOPs and parameters".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

import numpy as np

from .units import _brief, check_choice, check_count, check_int, check_positive, divisors

NORMS = ("rmsnorm", "layernorm")
# Largest value of any shape field (L, D, F, N, K, H, V, ...): 2**31. Far above any real model,
# and small enough that listing divisors for an error message stays instant.
MAX_DIM = 2**31


@dataclass(frozen=True)
class MLA:
    """Multi-head latent attention (DeepSeek-V2/V3): keys and values go through a low-rank latent.

    Per layer: ``q_lora_rank`` (0 = queries projected directly from D), ``kv_lora_rank`` (the
    cached latent), query/key head dims ``qk_nope_head_dim + qk_rope_head_dim`` and value head dim
    ``v_head_dim``. The decoupled RoPE key (``qk_rope_head_dim`` wide) is shared by all heads and
    cached next to the latent.
    """

    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    def __post_init__(self):
        for f in fields(self):
            minimum = 1 if f.name in ("kv_lora_rank", "qk_nope_head_dim", "v_head_dim") else 0
            object.__setattr__(self, f.name, check_int(f"MLA.{f.name}", getattr(self, f.name),
                                                       minimum=minimum, maximum=MAX_DIM))

    @property
    def qk_head_dim(self) -> int:
        """Width of one query/key head (no-RoPE part plus RoPE part)."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim


@dataclass(frozen=True)
class TransformerConfig:
    """A decoder-only transformer's shape, in the book's notation. Frozen and validated.

    L layers of width D; attention with N query heads and K key/value heads (K = N is multi-head,
    K = 1 multi-query, otherwise grouped-query) of dimension H; an MLP of hidden width F, gated
    (``glu``: three matrices, SwiGLU) or not (two matrices); vocabulary V.

    Mixture of experts (E > 1): every layer after the first ``n_dense_layers`` replaces its MLP by
    E routed experts of hidden width ``F_expert`` (default F), k of them active per token, plus
    ``n_shared_experts`` always-active experts of the same width and a [D, E] router.
    ``mla`` switches attention to multi-head latent attention (then K and H only describe the
    layout nominally; the MLA dimensions decide counts and the KV cache).

    Other options: ``bias`` (biases in every linear layer and in LayerNorms), ``norm``
    ("rmsnorm": D weights; "layernorm": D weights, plus D biases when ``bias``),
    ``learned_positions`` (rows of a learned position table; 0 for RoPE), ``dropout``
    (dropout layers present in training: they cost activation memory), ``sliding_window``
    (None: every layer attends to the whole context; W: every layer attends to the last W
    tokens only, as in Mistral 7B, so the KV cache holds at most W tokens per sequence; only
    :func:`~scaling_lib.transformer.kv_cache_bytes` uses it so far: attention FLOPs and
    activation memory still count every earlier token, an upper bound beyond W),
    ``capacity_factor`` (MoE only; None: dropless routing; c: each expert takes at most
    ⌈c·k·n/E⌉ of a group of n routed tokens and drops the rest, see
    :func:`scaling_lib.parallelism.expert.capacity`).

    Shape fields are whole numbers (Python or numpy integers, stored as int) up to 2**31.

    >>> cfg = TransformerConfig(L=32, D=4096, F=14336, N=32, K=8, H=128, V=128256)
    >>> cfg.is_moe, cfg.gqa_group
    (False, 4)
    """

    L: int
    D: int
    F: int
    N: int
    K: int
    H: int
    V: int
    glu: bool = True
    tied_embeddings: bool = False
    E: int = 1
    k: int = 1
    F_expert: int | None = None
    n_shared_experts: int = 0
    n_dense_layers: int = 0
    bias: bool = False
    norm: str = "rmsnorm"
    learned_positions: int = 0
    dropout: bool = False
    mla: MLA | None = None
    name: str = ""
    source: str = ""
    sliding_window: int | None = None
    capacity_factor: float | None = None
    kv_share: int = 1  # layers sharing one KV cache (cross-layer attention, Brandon et al. 2024)

    def __post_init__(self):
        for sym in ("L", "D", "F", "N", "K", "H", "V", "E", "k"):
            object.__setattr__(self, sym, check_int(sym, getattr(self, sym), maximum=MAX_DIM))
        object.__setattr__(self, "kv_share", check_int("kv_share", self.kv_share,
                                                       maximum=MAX_DIM))
        for sym in ("n_shared_experts", "n_dense_layers", "learned_positions"):
            object.__setattr__(self, sym, check_int(sym, getattr(self, sym), minimum=0,
                                                    maximum=MAX_DIM))
        for sym in ("F_expert", "sliding_window"):
            if getattr(self, sym) is not None:
                object.__setattr__(self, sym, check_int(sym, getattr(self, sym),
                                                        maximum=MAX_DIM))
        for sym in ("glu", "tied_embeddings", "bias", "dropout"):
            if not isinstance(getattr(self, sym), bool):
                raise ValueError(f"{sym}={_brief(getattr(self, sym))} must be True or False")
        if not isinstance(self.name, str) or not isinstance(self.source, str):
            raise ValueError(f"name={_brief(self.name)} and source={_brief(self.source)} must "
                             "be strings")
        if self.N % self.K:
            raise ValueError(f"K={self.K} kv heads must divide N={self.N} query heads; "
                             f"choose K in {divisors(self.N)}")
        if self.k > self.E:
            raise ValueError(f"k={self.k} active experts cannot exceed E={self.E} experts")
        if self.E == 1 and (self.n_shared_experts or self.n_dense_layers or self.k != 1):
            raise ValueError("n_shared_experts, n_dense_layers and k apply to MoE models only "
                             f"(E > 1); got E=1 with k={self.k}, "
                             f"n_shared_experts={self.n_shared_experts}, "
                             f"n_dense_layers={self.n_dense_layers}")
        if self.n_dense_layers > self.L:
            raise ValueError(f"n_dense_layers={self.n_dense_layers} exceeds L={self.L}")
        check_choice("norm", self.norm, NORMS)
        if self.capacity_factor is not None:
            cf = self.capacity_factor
            if not self.is_moe:
                raise ValueError(f"capacity_factor={_brief(cf)} applies to MoE models only "
                                 "(E > 1); use None for a dense model")
            if isinstance(cf, bool) or np.ndim(cf) or not check_positive("capacity_factor", cf) > 0:
                raise ValueError(f"capacity_factor={_brief(cf)} must be a positive number of "
                                 "expert slots per routed token (e.g. 1.25), or None for "
                                 "dropless routing")
            object.__setattr__(self, "capacity_factor", float(cf))
        if self.mla is not None and not isinstance(self.mla, MLA):
            raise ValueError(f"mla={_brief(self.mla)} must be an MLA(...) or None")

    # ---- derived shapes ---------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        """Whether the MLPs are mixtures of experts (E > 1)."""
        return self.E > 1

    @property
    def F_e(self) -> int:
        """Hidden width of one expert (F when ``F_expert`` is not given)."""
        return self.F if self.F_expert is None else self.F_expert

    @property
    def n_moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts (0 for a dense model)."""
        return self.L - self.n_dense_layers if self.is_moe else 0

    @property
    def gqa_group(self) -> int:
        """Query heads sharing one key/value head: N / K."""
        return self.N // self.K

    def with_changes(self, **changes) -> TransformerConfig:
        """A copy with some fields changed (validated again).

        >>> get("llama3-8b").with_changes(L=16).L
        16
        """
        unknown = sorted(set(changes) - {f.name for f in fields(self)})
        if unknown:
            raise ValueError(f"unknown field(s) {unknown}; valid: "
                             f"{', '.join(f.name for f in fields(self))}")
        return replace(self, **changes)

    def __repr__(self):
        label = f"{self.name!r}, " if self.name else ""
        core = ", ".join(f"{s}={getattr(self, s)}" for s in ("L", "D", "F", "N", "K", "H", "V"))
        moe = f", E={self.E}, k={self.k}" if self.is_moe else ""
        window = f", sliding_window={self.sliding_window}" if self.sliding_window else ""
        return f"TransformerConfig({label}{core}{moe}{window})"


def gpt(L: int, D: int, N: int, *, V: int = 51200, T_max: int = 2048, **kw) -> TransformerConfig:
    """A GPT-2/GPT-3-style model: F = 4D, plain GeLU MLP, biases, LayerNorm, learned positions,
    tied embeddings, dropout; head dimension D / N. Megatron-LM's GPT models use V = 51,200
    (a padded GPT-2 vocabulary) and T_max = 2,048 (Narayanan et al. 2021, Table 1).

    >>> gpt(24, 2304, 24).F
    9216
    """
    L, D, N = (check_int(sym, v, maximum=MAX_DIM) for sym, v in (("L", L), ("D", D), ("N", N)))
    if D % N:
        raise ValueError(f"N={N} heads must divide D={D}; choose N in {divisors(D)}")
    allowed = {f.name for f in fields(TransformerConfig)} - {"L", "D", "F", "N", "K", "H", "V"}
    unknown = sorted(set(kw) - allowed)
    if unknown:
        raise ValueError(f"unknown option(s) {unknown}; valid: {', '.join(sorted(allowed))}")
    opts = dict(glu=False, tied_embeddings=True, bias=True, norm="layernorm",
                learned_positions=T_max, dropout=True)
    opts.update(kw)
    return TransformerConfig(L=L, D=D, F=4 * D, N=N, K=N, H=D // N, V=V, **opts)


# ---- presets ------------------------------------------------------------------------------------
_LLAMA3_V = 128256  # Llama 3 tokenizer, 128K tokens (Llama 3 Herd of Models, section 3.2)

PRESETS: dict[str, TransformerConfig] = {
    # meta-llama/Meta-Llama-3-8B config.json: hidden 4096, intermediate 14336, 32 layers,
    # 32 heads, 8 kv heads, vocab 128256, tie_word_embeddings false. Also Llama 3 paper Table 3.
    "llama3-8b": TransformerConfig(32, 4096, 14336, 32, 8, 128, _LLAMA3_V, name="llama3-8b",
                                   source="meta-llama/Meta-Llama-3-8B config.json; "
                                          "Llama 3 Herd of Models (2024) Table 3"),
    # meta-llama/Meta-Llama-3-70B config.json: 8192, 28672, 80 layers, 64 heads, 8 kv heads.
    "llama3-70b": TransformerConfig(80, 8192, 28672, 64, 8, 128, _LLAMA3_V, name="llama3-70b",
                                    source="meta-llama/Meta-Llama-3-70B config.json; "
                                           "Llama 3 Herd of Models (2024) Table 3"),
    # Llama 3 Herd of Models Table 3 and meta-llama/Llama-3.1-405B config.json: 126 layers,
    # 16384, FFN 53248, 128 heads, 8 kv heads.
    "llama3-405b": TransformerConfig(126, 16384, 53248, 128, 8, 128, _LLAMA3_V,
                                     name="llama3-405b",
                                     source="Llama 3 Herd of Models (2024) Table 3; "
                                            "meta-llama/Llama-3.1-405B config.json"),
    # meta-llama/Llama-2-13b-hf config.json: 5120, 13824, 40 layers, 40 heads (MHA), vocab 32000.
    "llama2-13b": TransformerConfig(40, 5120, 13824, 40, 40, 128, 32000, name="llama2-13b",
                                    source="meta-llama/Llama-2-13b-hf config.json; "
                                           "Touvron et al. 2023 (Llama 2) Table 1"),
    # Brown et al. 2020 Table 2.1: 96 layers, d_model 12288, 96 heads of 128, context 2048;
    # F = 4 d_model; GPT-2 BPE vocabulary of 50257 (Radford et al. 2019); tied embeddings.
    "gpt3-175b": gpt(96, 12288, 96, V=50257, T_max=2048, name="gpt3-175b",
                     source="Brown et al. 2020 (GPT-3) Table 2.1"),
    # Chowdhery et al. 2022 (PaLM) Table 1 and section 2: 118 layers, 18432, 48 heads of 256,
    # multi-query (K = 1), SwiGLU with F = 4D, shared input/output embedding, V = 256k, no biases.
    "palm-540b": TransformerConfig(118, 18432, 73728, 48, 1, 256, 256000, tied_embeddings=True,
                                   norm="layernorm", name="palm-540b",
                                   source="Chowdhery et al. 2022 (PaLM) Table 1, section 2"),
    # mistralai/Mixtral-8x7B-v0.1 config.json: 4096, 14336, 32 layers, 32 heads, 8 kv heads,
    # vocab 32000, 8 local experts, 2 per token.
    "mixtral-8x7b": TransformerConfig(32, 4096, 14336, 32, 8, 128, 32000, E=8, k=2,
                                      name="mixtral-8x7b",
                                      source="mistralai/Mixtral-8x7B-v0.1 config.json"),
    # deepseek-ai/DeepSeek-V3 config.json and DeepSeek-V3 Technical Report (arXiv 2412.19437)
    # section 4.2: 61 layers, 7168 wide, MLA with 128 heads (q_lora_rank 1536, kv_lora_rank
    # 512, qk dims 128 + 64 RoPE, v 128); first 3 layers dense (F = 18432); the other 58 have
    # 256 routed experts of width 2048, 8 active, plus 1 shared expert; vocab 129280, untied.
    # Left out: the multi-token-prediction module (about 14B more parameters in the checkpoint)
    # and the router's per-expert bias (256 numbers per layer, a load-balancing buffer).
    "deepseek-v3": TransformerConfig(61, 7168, 18432, 128, 128, 128, 129280, E=256, k=8,
                                     F_expert=2048, n_shared_experts=1, n_dense_layers=3,
                                     mla=MLA(1536, 512, 128, 64, 128), name="deepseek-v3",
                                     source="deepseek-ai/DeepSeek-V3 config.json; "
                                            "DeepSeek-V3 Technical Report (2024) section 4.2"),
}

_ALIASES = {
    "llama-3-8b": "llama3-8b", "llama3.1-8b": "llama3-8b",
    "llama-3-70b": "llama3-70b", "llama3.1-70b": "llama3-70b",
    "llama-3-405b": "llama3-405b", "llama3.1-405b": "llama3-405b",
    "llama-2-13b": "llama2-13b", "gpt3": "gpt3-175b", "gpt-3": "gpt3-175b",
    "palm": "palm-540b", "mixtral": "mixtral-8x7b", "deepseek-v3-671b": "deepseek-v3",
}


def names() -> tuple[str, ...]:
    """Names of every model preset."""
    return tuple(PRESETS)


def get(name) -> TransformerConfig:
    """Look up a model preset by name (a TransformerConfig passes through unchanged).

    >>> get("llama3-70b").L
    80
    """
    if isinstance(name, TransformerConfig):
        return name
    if not isinstance(name, str):
        raise ValueError(f"model must be a preset name or a TransformerConfig, got "
                         f"{_brief(name)}")
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in PRESETS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(PRESETS)}")
    return PRESETS[key]


# ---- Hugging Face config.json -------------------------------------------------------------------
# Each field: the keys that may hold it, first match wins (Llama/Mistral/Qwen names, then GPT-2).
_HF_KEYS = {
    "D": ("hidden_size", "n_embd", "d_model"),
    "L": ("num_hidden_layers", "n_layer", "num_layers"),
    "N": ("num_attention_heads", "n_head", "num_heads"),
    "V": ("vocab_size",),
}
_TIED_BY_DEFAULT = {"gpt2", "gpt_neo", "gemma", "gemma2", "gemma3_text", "opt", "bloom"}
# Models whose sliding window covers only some layers (Gemma 2/3 alternate local and global
# attention; configs with sliding_window_pattern or layer_types): the window is not stored, so
# their KV cache is an upper bound.
_PARTIAL_WINDOW = {"gemma2", "gemma3", "gemma3_text", "cohere2"}


def _first_key(cfg: dict, keys: tuple[str, ...], what: str) -> str:
    for key in keys:
        if cfg.get(key) is not None:
            return key
    raise ValueError(f"config.json has none of {', '.join(repr(k) for k in keys)} (needed for "
                     f"{what}); keys present: {', '.join(sorted(map(str, cfg))) or 'none'}")


def _hf_int(cfg: dict, key: str, minimum: int = 1) -> int:
    """cfg[key] as an int, or a ValueError naming the key (JSON may write 4096 as 4096.0)."""
    value = cfg[key]
    if isinstance(value, (list, tuple, dict, set)) or hasattr(value, "shape") and value.shape:
        raise ValueError(f"config.json {key}={_brief(value)} must be one whole number")
    return int(check_count(f"config.json {key}", value, minimum=minimum, maximum=MAX_DIM))


def _hf_bool(cfg: dict, key: str, default: bool) -> bool:
    value = cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ValueError(f"config.json {key}={_brief(value)} must be true or false")
    return value


def from_hf_config(cfg: dict, *, name: str = "") -> TransformerConfig:
    """Build a TransformerConfig from a Hugging Face ``config.json`` (as a dict).

    Understands Llama-style keys (``hidden_size``, ``intermediate_size``, ``num_hidden_layers``,
    ``num_attention_heads``, ``num_key_value_heads``, ``head_dim``, ``vocab_size``,
    ``tie_word_embeddings``, ``attention_bias``/``mlp_bias``, ``sliding_window`` with Qwen's
    ``use_sliding_window``), Mixtral-style experts (``num_local_experts``,
    ``num_experts_per_tok``), Qwen2-MoE's shared expert (``shared_expert_intermediate_size``,
    counted as that many ``moe_intermediate_size``-wide shared experts, as DeepSeek's are),
    DeepSeek-style MoE and MLA (``n_routed_experts``, ``moe_intermediate_size``,
    ``n_shared_experts``, ``first_k_dense_replace``, ``q_lora_rank``, ``kv_lora_rank``, ...) and
    GPT-2 names (``n_embd``, ``n_layer``, ``n_head``, ``n_positions``).

    The head dimension is ``head_dim`` when given (Gemma: 256 with D = 3072 and N = 16), else
    D / N, which must then be whole. ``num_key_value_heads`` absent (or null) means multi-head
    attention; 0 is an error. Missing or malformed keys raise a ValueError naming the key. Not
    modelled: biases on only some projections (Qwen2's q/k/v biases), Qwen2-MoE's [D, 1]
    shared-expert gate (D parameters per layer), a sliding window on only some layers (Gemma 2/3;
    Qwen2 with ``max_window_layers`` < L): the window is then left out, an upper bound on the
    KV cache), DeepSeek's multi-token-prediction layers.

    >>> c = from_hf_config({"hidden_size": 4096, "intermediate_size": 14336,
    ...     "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    ...     "vocab_size": 128256})
    >>> c == get("llama3-8b").with_changes(name="", source="")
    True
    """
    if not isinstance(cfg, Mapping):
        raise ValueError(f"expected the parsed config.json as a dict, got {type(cfg).__name__}")
    if not isinstance(name, str):
        raise ValueError(f"name={_brief(name)} must be a string")
    cfg = dict(cfg)

    def required(field: str, keys=None, what="") -> int:
        return _hf_int(cfg, _first_key(cfg, keys or _HF_KEYS[field], what or field))

    def optional(key: str, default, minimum: int = 1):
        return default if cfg.get(key) is None else _hf_int(cfg, key, minimum)

    D = required("D", what="D (model width)")
    L = required("L", what="L (layers)")
    N = required("N", what="N (query heads)")
    V = required("V", what="V (vocabulary)")
    K = optional("num_key_value_heads", N)  # absent: multi-head attention (HF's default)
    model_type = cfg.get("model_type", "")
    if not isinstance(model_type, str):
        raise ValueError(f"config.json model_type={_brief(model_type)} must be a string")
    gpt2_style = "n_embd" in cfg and "hidden_size" not in cfg
    if gpt2_style:
        F = optional("n_inner", 4 * D)
    else:
        F = required("F", ("intermediate_size", "ffn_dim", "d_ff"), "F (MLP width)")
    if cfg.get("head_dim") is not None:
        H = _hf_int(cfg, "head_dim")
    elif D % N:
        raise ValueError(f"config.json has no head_dim and N={N} heads do not divide D={D} "
                         f"(D/N = {D / N:.4g}); add head_dim (e.g. Gemma's 256)")
    else:
        H = D // N
    tied = _hf_bool(cfg, "tie_word_embeddings", model_type in _TIED_BY_DEFAULT or gpt2_style)
    attn_bias = _hf_bool(cfg, "attention_bias", False)
    mlp_bias = _hf_bool(cfg, "mlp_bias", False)
    if attn_bias != mlp_bias:
        raise ValueError(f"attention_bias={attn_bias} but mlp_bias={mlp_bias}: biases on only "
                         "some layers are not modelled; the config's bias flag covers all linear "
                         "layers")
    opts: dict = dict(tied_embeddings=tied, bias=attn_bias or gpt2_style, name=name or model_type)
    if gpt2_style:
        pdrop = cfg.get("resid_pdrop")
        opts.update(glu=False, norm="layernorm", learned_positions=optional("n_positions", 0, 0),
                    dropout=pdrop is not None and bool(check_positive(
                        "config.json resid_pdrop", pdrop, allow_zero=True)))
    # Sliding-window attention (Mistral 7B v0.1: 4096 on every layer). Qwen2 configs carry a
    # window with use_sliding_window=false, and max_window_layers < L puts it on some layers only.
    window = optional("sliding_window", None)
    partial = model_type in _PARTIAL_WINDOW or "sliding_window_pattern" in cfg \
        or "layer_types" in cfg or optional("max_window_layers", L, 0) < L
    if window is not None and _hf_bool(cfg, "use_sliding_window", True) and not partial:
        opts["sliding_window"] = window
    E = 0
    for key in ("num_local_experts", "n_routed_experts", "num_experts"):
        if cfg.get(key) is not None:
            E = _hf_int(cfg, key, minimum=0)
            break
    if E > 1:
        opts["E"] = E
        opts["k"] = required("k", ("num_experts_per_tok", "top_k"), "k (active experts)")
        F_e = optional("moe_intermediate_size", None)
        if F_e is not None:
            opts["F_expert"] = F_e
        n_shared = optional("n_shared_experts", 0, 0)
        shared_width = optional("shared_expert_intermediate_size", 0, 0)
        if shared_width:  # Qwen2-MoE: one wide shared expert = shared_width / F_e narrow ones
            width = F_e or F
            if shared_width % width:
                raise ValueError(f"shared_expert_intermediate_size={shared_width} is not a "
                                 f"multiple of the expert width {width}: not modelled")
            n_shared += shared_width // width
        opts["n_shared_experts"] = n_shared
        opts["n_dense_layers"] = optional("first_k_dense_replace", 0, 0)
        for key in ("moe_layer_freq", "decoder_sparse_step"):
            if optional(key, 1) != 1:
                raise ValueError(f"{key}={cfg[key]}: only every layer being MoE "
                                 "(after first_k_dense_replace) is modelled")
        if cfg.get("mlp_only_layers"):
            raise ValueError(f"mlp_only_layers={_brief(cfg['mlp_only_layers'])}: dense layers "
                             "among the MoE layers are not modelled")
    if cfg.get("kv_lora_rank"):
        need = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
        missing = [key for key in need if cfg.get(key) is None]
        if missing:
            raise ValueError(f"config.json has kv_lora_rank (MLA) but lacks {missing}")
        opts["mla"] = MLA(optional("q_lora_rank", 0, 0),
                          *(_hf_int(cfg, key, 0 if key == "qk_rope_head_dim" else 1)
                            for key in need))
        H = opts["mla"].v_head_dim
        K = N
    return TransformerConfig(L=L, D=D, F=F, N=N, K=K, H=H, V=V, **opts)
