"""Make a tiny random-weight Qwen3 model directory that vLLM (CPU included) can load.

The weights are random, so the text it writes is noise; what matters is that every code path of a
real model runs (tokenizer, chat template, attention, sampling, speculative decoding) in seconds.
Same arguments and corpus give the same files (weights and tokenizer).

Usage (with the vLLM environment's Python, which has transformers and tokenizers):

    python runners/tiny_model.py OUT_DIR [--layers 2 --hidden 128 --vocab 2048 --seed 0 --corpus PATH]

Needs only the standard library, ``tokenizers``, ``transformers`` and ``torch``.
"""

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

DEFAULT_CORPUS = Path("/work/shared/datasets/spec_bench_questions.jsonl")

# Qwen's chat markers, so prompts look like the real model's and vLLM's chat path is exercised.
BOS = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [BOS, IM_START, IM_END]

# transformers' default (0.02) makes a 2-layer model emit one token forever, whatever the prompt; 0.1
# gives varied, prompt-dependent output, so fingerprints and n-gram acceptance mean something.
INIT_STD = 0.1

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def corpus_lines(path: Path) -> Iterator[str]:
    """Text to train the tokenizer on: every turn of a Spec-Bench JSONL file, or the lines of any other file."""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            if path.suffix == ".jsonl":
                yield from json.loads(line).get("turns", [])
            else:
                yield line


def train_tokenizer(corpus: Path, vocab_size: int):
    """A byte-level BPE tokenizer (like Qwen's) wrapped for transformers, with the chat template set."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus_lines(corpus), trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=None,
        eos_token=IM_END,
        pad_token=BOS,
        unk_token=None,
        additional_special_tokens=[IM_START, IM_END],
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def build_config(tokenizer, *, layers: int, hidden: int, vocab_size: int):
    """A Qwen3 config scaled down: 4 query heads and 2 KV heads of size hidden/4 (GQA, as in real Qwen3)."""
    from transformers import Qwen3Config

    heads = 4
    return Qwen3Config(
        vocab_size=max(vocab_size, len(tokenizer)),
        hidden_size=hidden,
        intermediate_size=hidden * 3,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads // 2,
        head_dim=hidden // heads,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        initializer_range=INIT_STD,
        torch_dtype="bfloat16",
        bos_token_id=tokenizer.convert_tokens_to_ids(BOS),
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        pad_token_id=tokenizer.convert_tokens_to_ids(BOS),
    )


def make_tiny_model(
    out_dir: str | Path,
    *,
    layers: int = 2,
    hidden: int = 128,
    vocab_size: int = 2048,
    seed: int = 0,
    corpus: str | Path = DEFAULT_CORPUS,
) -> Path:
    """Write config, safetensors weights and tokenizer to ``out_dir`` and return it."""
    import torch
    from transformers import Qwen3ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(Path(corpus), vocab_size)
    config = build_config(tokenizer, layers=layers, hidden=hidden, vocab_size=vocab_size)
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=128, help="a multiple of 4 (4 query heads)")
    parser.add_argument("--vocab", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS), help="Spec-Bench JSONL or plain text")
    args = parser.parse_args()
    out = make_tiny_model(
        args.out_dir,
        layers=args.layers,
        hidden=args.hidden,
        vocab_size=args.vocab,
        seed=args.seed,
        corpus=args.corpus,
    )
    print(out)


if __name__ == "__main__":
    main()
