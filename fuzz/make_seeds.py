"""Writes small valid cartridges, the fuzzers' seeds, into a directory.

    python fuzz/make_seeds.py OUT_DIR

One per engine and model: a tiktoken vocabulary (256 bytes + merges learned from a sample, a
special token), and tokenizer.json vocabularies trained with `tokenizers` on the same sample:
byte-level BPE, SentencePiece-style BPE with byte fallback, WordPiece, Unigram, WordLevel. They are
tiny (a few hundred tokens) so that mutations land on structure, not on bulk tables; they are
generated rather than committed so that they always follow the current cartridge format.
"""
from __future__ import annotations

import sys
from pathlib import Path

SAMPLE = (
    "Hello world! The quick brown fox jumps over the lazy dog. don't stop 12345 67890\n"
    "中文字符 日本語のテキスト 한국어 émoji 😀 naïve café — “quotes” <|endoftext|>\n"
) * 20


def tiktoken_seed(out: Path) -> None:
    import crayon_hf.tiktoken as tk
    from crayon_hf.tiktoken._encodings import KNOWN_ENCODINGS

    ranks = {bytes([b]): b for b in range(256)}
    # Greedy pair merges over the sample's bytes: enough structure for merges to exist.
    words = [w.encode() for w in SAMPLE.split()]
    seqs = [[bytes([b]) for b in w] for w in words]
    while len(ranks) < 400:
        counts: dict[tuple[bytes, bytes], int] = {}
        for s in seqs:
            for a, b in zip(s, s[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + 1
        if not counts:
            break
        (a, b), _ = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
        ranks[a + b] = len(ranks)
        seqs = [_merge(s, a, b) for s in seqs]
    enc = tk.Encoding("fuzz", pat_str=KNOWN_ENCODINGS["cl100k_base"].pat_str, mergeable_ranks=ranks,
                      special_tokens={"<|endoftext|>": len(ranks)})
    enc.save_cartridge(out / "tiktoken.dat")


def _merge(s: list[bytes], a: bytes, b: bytes) -> list[bytes]:
    out, i = [], 0
    while i < len(s):
        if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
            out.append(a + b)
            i += 2
        else:
            out.append(s[i])
            i += 1
    return out


def hf_seeds(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    import crayon_hf

    def save(name: str, tok: Tokenizer, trainer) -> None:
        tok.train_from_iterator(SAMPLE.splitlines(), trainer)
        crayon_hf.Tokenizer.from_str(tok.to_str()).save_cartridge(out / f"{name}.dat")

    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    save("bpe_bytes", t, trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))

    t = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    t.pre_tokenizer = pre_tokenizers.Metaspace()
    t.decoder = decoders.Metaspace()
    save("bpe_chars", t, trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"]
                                             + [f"<0x{b:02X}>" for b in range(256)]))

    t = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    t.normalizer = normalizers.BertNormalizer()
    t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    save("wordpiece", t, trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[UNK]", "[CLS]", "[SEP]"]))

    t = Tokenizer(models.Unigram())
    t.pre_tokenizer = pre_tokenizers.Metaspace()
    save("unigram", t, trainers.UnigramTrainer(vocab_size=120, special_tokens=["<unk>"], unk_token="<unk>"))

    t = Tokenizer(models.WordLevel(unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    save("wordlevel", t, trainers.WordLevelTrainer(special_tokens=["<unk>"]))


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    tiktoken_seed(out)
    hf_seeds(out)
    for p in sorted(out.glob("*.dat")):
        print(f"{p}  {p.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
