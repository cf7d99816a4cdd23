"""Usage: PYTHON tests/device/make_tiny_model.py OUTPUT_DIR [--size tiny|large] [--seed N] [--device cuda|cpu]

A Llama with random weights for the real-SGLang device run, made offline (nothing from a hub): a word-level
tokenizer trained with `tokenizers` on the sentences below, a LlamaConfig and LlamaForCausalLM(config) saved with
save_pretrained (safetensors, bfloat16). `tiny` has about 2 million parameters; `large` about 1.5 billion (3 GB),
for measurements where loading the weights takes a while. The same seed and size give the same files on the same
transformers and torch.

Run with a Python that has torch (the GPU host's /opt/torch/.venv/bin/python) and the wheelhouse's transformers and
tokenizers first on PYTHONPATH (record_real_sglang.sh does so).
"""

import argparse
import json
import os
import sys

# Words of the probes the collection sends (validate's and diagnose's generate: "The capital of France is") and of
# the run, so that prompts tokenize to words rather than <unk>.
SENTENCES = (
    "The capital of France is Paris",
    "The GPU node serves the model",
    "SGLang starts the server and the server answers every request",
    "A token is generated on the GPU and the text is sent back",
    "The scheduler reads the request and the model writes the answer",
    "Every node of the fleet runs the same stack",
    "The cache is written by the service user",
    "Memory on the GPU is held by the server while it runs",
)
SPECIAL = ("<unk>", "<s>", "</s>", "<pad>")
# head_dim 64 (hidden / heads), a size every attention backend of SGLang supports; 4 heads, so that a tensor
# parallel size of 2 or 4 divides them.
SIZES = {
    "tiny": {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 3, "num_attention_heads": 4,
             "num_key_value_heads": 4},
    "large": {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 24, "num_attention_heads": 16,
              "num_key_value_heads": 8},
}
MAX_POSITIONS = 2048


def build_tokenizer():
    """A word-level tokenizer (lower-cased words, whitespace and punctuation split), trained on SENTENCES; the
    special tokens take ids 0 to 3 and a sequence starts with <s>."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordLevel
    from tokenizers.trainers import WordLevelTrainer
    tokenizer = Tokenizer(WordLevel(unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(SENTENCES, WordLevelTrainer(special_tokens=list(SPECIAL), min_frequency=1))
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tokenizer


def tokenizer_config():
    """tokenizer_config.json, written by hand so that any transformers of 4.x or 5.x loads it the same way."""
    return {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": SPECIAL[0], "bos_token": SPECIAL[1],
            "eos_token": SPECIAL[2], "pad_token": SPECIAL[3], "model_max_length": MAX_POSITIONS,
            "clean_up_tokenization_spaces": False}


def model_config(size, vocab_size):
    """LlamaConfig's arguments; the special tokens' ids are the tokenizer's."""
    return dict(SIZES[size], vocab_size=vocab_size, max_position_embeddings=MAX_POSITIONS, bos_token_id=1,
                eos_token_id=2, pad_token_id=3, tie_word_embeddings=False, initializer_range=0.02)


def write_tokenizer(out):
    tokenizer = build_tokenizer()
    tokenizer.save(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as stream:
        json.dump(tokenizer_config(), stream, indent=1, sort_keys=True)
        stream.write("\n")
    with open(os.path.join(out, "special_tokens_map.json"), "w") as stream:
        json.dump({key: value for key, value in tokenizer_config().items() if key.endswith("_token")}, stream,
                  indent=1, sort_keys=True)
        stream.write("\n")
    return tokenizer


def write_model(out, size, vocab_size, seed, device):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    config = LlamaConfig(**model_config(size, vocab_size))
    torch.set_default_device(device)
    model = LlamaForCausalLM(config)
    model = model.to(torch.bfloat16)
    # Random weights pick special tokens as often as words; a greedy generate that began with </s> would end with
    # no text, and validate fails a server that brings back none. With their output rows zero, their logit is 0,
    # below the best of the words'.
    with torch.no_grad():
        model.lm_head.weight[:len(SPECIAL)] = 0
    model.save_pretrained(out)
    return sum(parameter.numel() for parameter in model.parameters())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--seed", type=int, default=20261207)
    parser.add_argument("--device", default=None, help="where the weights are made (default: cuda where there is one)")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    tokenizer = write_tokenizer(args.out)
    vocab_size = tokenizer.get_vocab_size()
    device = args.device
    if device is None:
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
    count = write_model(args.out, args.size, vocab_size, args.seed, device)
    from transformers import AutoTokenizer
    loaded = AutoTokenizer.from_pretrained(args.out)
    ids = loaded("The capital of France is")["input_ids"]
    files = {name: os.path.getsize(os.path.join(args.out, name)) for name in sorted(os.listdir(args.out))}
    json.dump({"out": args.out, "size": args.size, "seed": args.seed, "parameters": count, "vocab_size": vocab_size,
               "probe_ids": ids, "probe_decoded": loaded.decode(ids, skip_special_tokens=True), "files": files},
              sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
