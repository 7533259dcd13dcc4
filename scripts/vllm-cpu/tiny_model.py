"""Write a tiny Llama with random weights and a locally trained tokenizer, deterministically.

The real-vLLM test tier needs a model, and these machines reach no model hub. vLLM's CPU
attention backend accepts head sizes 32, 64, 80, 96, 112, 128, 160, 192, 224, 256 and 512,
so the model has 2 heads of 32 (hidden 64). Weights are random (seeded) and the output is
gibberish; requests set ``ignore_eos`` so that their lengths are exact. The tokenizer is a
byte-level BPE trained on text this script makes from a seeded generator, so the same script
writes the same files on every machine.

Run with the vLLM environment's interpreter (it needs torch, transformers and tokenizers)::

    python tiny_model.py OUT_DIR
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SEED = 20261201
VOCAB_SIZE = 2048
MAX_POSITIONS = 4096
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
)


def corpus(lines: int = 20000) -> list[str]:
    """Seeded pseudo-English: enough distinct words for a 2k-token vocabulary."""
    # Reproducible text, not secrets: the seeded generator is the point.
    generator = random.Random(SEED)  # noqa: S311
    syllables = [a + b for a in "bcdfghjklmnprstvwz" for b in "aeiou"]
    words = [
        "".join(generator.choice(syllables) for _ in range(generator.randint(1, 4)))
        for _ in range(3000)
    ]
    return [
        " ".join(generator.choice(words) for _ in range(generator.randint(4, 16))) + "."
        for _ in range(lines)
    ]


def write_tokenizer(out: Path) -> None:
    """Train a byte-level BPE on the corpus and save it as a fast tokenizer."""
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",  # noqa: S106 (a vocabulary entry, not a password)
        eos_token="</s>",  # noqa: S106
        pad_token="<pad>",  # noqa: S106
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)


def write_model(out: Path) -> None:
    """A 2-layer Llama with seeded random weights, in bfloat16 safetensors."""
    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)


def main() -> None:
    """Write the model and tokenizer into the directory given."""
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    write_tokenizer(out)
    write_model(out)
    print(f"tiny model written to {out}")


if __name__ == "__main__":
    main()
