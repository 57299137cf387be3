"""Generate the vLLM node's tiny random-weight Llama model into a directory (no hub access).

Run with the vLLM virtualenv's Python (it needs torch, transformers, tokenizers and
safetensors, which live there, not in faultkit's environment)::

    python make_model.py OUT_DIR

Writes a Hugging Face model directory: ``config.json``, ``generation_config.json``,
``model.safetensors`` (random fp32 weights, fixed seed), and a tokenizer built here with
the ``tokenizers`` library (byte-level BPE trained on a fixed generated corpus, so the same
inputs always give the same vocabulary) with a chat template. Output is deterministic.

Shape: hidden 128, 4 heads (head size 32 — the CPU attention backend supports 32, 64, 80, …;
head size 16 starts, answers /health 200 and then dies on the first request), 2 layers,
2048 positions. Everything runs with ``HF_HUB_OFFLINE=1`` / ``TRANSFORMERS_OFFLINE=1``.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

HIDDEN = 128
HEADS = 4
KV_HEADS = 4
LAYERS = 2
INTERMEDIATE = 256
MAX_POSITIONS = 2048
VOCAB_TARGET = 2048
SEED = 1234

SPECIALS = ["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] + eos_token + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)

_WORDS_TEXT = (
    "the of and to in is was for on that with as by at from it an be this are or his "
    "which had not but have were they one their all been has its more when who would "
    "there we can what about up out if into time only other so some them these her two "
    "than first new may then do any like my now over such our man me even most made "
    "after also did many before must through back years where much your way well down "
    "should because each just those people how too little state good very make world "
    "still own see men work long get here between both life being under never day same "
    "another know while last might us great old year off come since against go came "
    "right used take three model token server request latency cache memory engine "
    "stream health metric queue batch prompt answer fault node restart kill pause"
)
_WORDS = _WORDS_TEXT.split()


def _corpus(lines: int = 4000) -> list[str]:
    rng = random.Random(SEED)
    out = []
    for _ in range(lines):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(4, 16))]
        sentence = " ".join(words).capitalize() + rng.choice([".", "?", "!", ","])
        out.append(sentence)
    return out


def build_tokenizer(out: Path) -> int:
    """Train and save the tokenizer; return its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_TARGET,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        additional_special_tokens=SPECIALS[3:],
        model_max_length=MAX_POSITIONS,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))
    return len(fast)


def build_model(out: Path, vocab_size: int) -> None:
    """Write config.json, generation_config.json and model.safetensors (fp32, seeded)."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=SPECIALS.index("<s>"),
        eos_token_id=SPECIALS.index("</s>"),
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config).to(torch.float32)
    model.save_pretrained(str(out), safe_serialization=True)
    GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id
    ).save_pretrained(str(out))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    vocab = build_tokenizer(out)
    build_model(out, vocab)
    print(f"wrote tiny Llama (vocab {vocab}, hidden {HIDDEN}, {LAYERS} layers) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
