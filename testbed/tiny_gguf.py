"""Generate a tiny random-weight llama-architecture GGUF model (well under 1 MB).

The file is a *valid* model for llama.cpp: llama architecture metadata, an SPM ("llama")
tokenizer with byte-fallback tokens and a few hundred word pieces, BOS/EOS ids, a ChatML
chat template, and F32 tensors for a 2-layer, 64-wide transformer. Its output is
gibberish; what matters is that llama-server loads it, tokenizes, batches, streams and
exposes metrics exactly as it does for a real model.

Deterministic: the same ``seed`` gives a byte-identical file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

N_EMBD = 64
N_HEAD = 4
N_LAYER = 2
N_FF = 128
N_CTX_TRAIN = 2048

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "it",
    "an",
    "were",
    "are",
    "which",
    "this",
    "be",
    "or",
    "has",
    "had",
    "not",
    "but",
    "their",
    "they",
    "have",
    "one",
    "all",
    "been",
    "its",
    "new",
    "more",
    "who",
    "also",
    "two",
    "after",
    "first",
    "time",
    "up",
    "other",
    "into",
    "only",
    "over",
    "can",
    "would",
    "most",
    "some",
    "many",
    "may",
    "such",
    "about",
    "these",
    "out",
    "than",
    "then",
    "them",
    "any",
    "like",
    "when",
    "will",
    "could",
    "made",
    "him",
    "each",
    "well",
    "where",
    "most",
    "through",
    "between",
    "both",
    "under",
    "system",
    "model",
    "token",
    "request",
    "server",
    "memory",
    "node",
    "load",
    "fault",
    "recover",
    "detect",
    "latency",
    "error",
    "stream",
    "cache",
    "block",
    "queue",
    "batch",
    "prefill",
    "decode",
    "restart",
    "health",
    "ready",
    "alert",
    "metric",
]


def _vocab() -> tuple[list[bytes], list[float], list[int]]:
    """SPM vocabulary: control tokens, 256 byte tokens, then word pieces (▁-prefixed)."""
    from gguf import TokenType

    tokens: list[bytes] = [b"<unk>", b"<s>", b"</s>", b"<|im_start|>", b"<|im_end|>"]
    types = [
        TokenType.UNKNOWN,
        TokenType.CONTROL,
        TokenType.CONTROL,
        TokenType.CONTROL,
        TokenType.CONTROL,
    ]
    scores = [0.0] * len(tokens)
    for byte in range(256):
        tokens.append(f"<0x{byte:02X}>".encode())
        types.append(TokenType.BYTE)
        scores.append(0.0)
    pieces: list[str] = ["▁"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces += ["▁" + chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces += ["▁" + w for w in dict.fromkeys(_WORDS)]
    for i, piece in enumerate(pieces):
        tokens.append(piece.encode())
        types.append(TokenType.NORMAL)
        scores.append(-float(i))
    return tokens, scores, [int(t) for t in types]


def write_tiny_gguf(path: Path, *, seed: int = 0) -> Path:
    """Write the model to ``path`` (atomically) and return it."""
    import gguf

    rng = np.random.default_rng(seed)
    tokens, scores, types = _vocab()
    n_vocab = len(tokens)

    def weights(*shape: int, scale: float = 0.08) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    tmp = path.with_suffix(".tmp")
    writer = gguf.GGUFWriter(str(tmp), "llama")
    writer.add_name("faultkit-tiny-llama")
    writer.add_context_length(N_CTX_TRAIN)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(4)  # <|im_end|> ends a chat turn
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_chat_template(CHATML)

    ones = np.ones(N_EMBD, dtype=np.float32)
    writer.add_tensor("token_embd.weight", weights(n_vocab, N_EMBD))
    for layer in range(N_LAYER):
        prefix = f"blk.{layer}"
        writer.add_tensor(f"{prefix}.attn_norm.weight", ones)
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"{prefix}.{name}.weight", weights(N_EMBD, N_EMBD))
        writer.add_tensor(f"{prefix}.ffn_norm.weight", ones)
        writer.add_tensor(f"{prefix}.ffn_gate.weight", weights(N_FF, N_EMBD))
        writer.add_tensor(f"{prefix}.ffn_up.weight", weights(N_FF, N_EMBD))
        writer.add_tensor(f"{prefix}.ffn_down.weight", weights(N_EMBD, N_FF))
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", weights(n_vocab, N_EMBD))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(path)
    return path
