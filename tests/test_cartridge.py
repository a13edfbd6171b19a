"""Cartridges: the checksum, save/map round trips, and clear errors for damaged or hostile files."""

from __future__ import annotations

import json
import os
import random
import struct
import time

import pytest

import crayon_hf.tiktoken as tk
from crayon_hf._native import CartridgeError, native

# XXH64 test vectors, computed with the reference implementation (the `xxhash` package, which
# wraps Yann Collet's C code): (data, seed, digest).
XXH64_VECTORS = [
    (b"", 0, 0xEF46DB3751D8E999),
    (b"", 1, 0xD5AFBA1336A3BE4B),
    (b"a", 0, 0xD24EC4F1A98C6E5B),
    (b"abc", 0, 0x44BC2CF5AD770999),
    (b"abc", 2**64 - 1, 0x28306E589CC02176),
    (b"x" * 31, 0, 0x60DD0D01083B99F0),
    (b"x" * 32, 0, 0xE2DF261FC2EC30EB),
    (b"x" * 32, 1, 0x926D5508EF687ACB),
    (b"hello world" * 10, 0, 0x62FF2926702F21C6),
    (b"hello world" * 10, 2**64 - 1, 0x95DF00A29B0736C8),
]


@pytest.mark.parametrize("data,seed,digest", XXH64_VECTORS)
def test_xxhash64_vectors(data, seed, digest):
    assert native.xxhash64(data, seed) == digest


def test_xxhash64_against_reference_when_installed():
    xxhash = pytest.importorskip("xxhash", reason="optional cross-check; the vectors above always run")
    rng = random.Random(1)
    for n in list(range(0, 70)) + [1000, 4096, 100_003]:
        data = bytes(rng.randrange(256) for _ in range(n))
        assert native.xxhash64(data, n) == xxhash.xxh64_intdigest(data, n)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("cart") / "cl100k.dat"
    tk.get_encoding("cl100k_base").save_cartridge(path)
    return path


def test_roundtrip(saved):
    enc = tk.Encoding.from_cartridge(saved)
    ref = tk.get_encoding("cl100k_base")
    text = "The cartridge maps back: 12345 ünïcödé <|endoftext|>"
    assert enc.encode(text, allowed_special="all") == ref.encode(text, allowed_special="all")
    assert enc.name == "cl100k_base"
    assert enc.n_vocab == ref.n_vocab
    assert enc._special_tokens == ref._special_tokens
    assert enc.crayon_backend == "native"


def test_in_memory_encoding_saves_identically(tmp_path):
    base = tk.get_encoding("r50k_base")
    enc = tk.Encoding("r50k_copy", pat_str=base._pat_str, mergeable_ranks=base._mergeable_ranks, special_tokens=base._special_tokens)
    enc.save_cartridge(tmp_path / "copy.dat")
    again = tk.Encoding.from_cartridge(tmp_path / "copy.dat")
    assert again.name == "r50k_copy"
    assert again.encode_ordinary("same ids either way") == base.encode_ordinary("same ids either way")


def test_load_is_fast(saved):
    # Not a timing assertion: records that mapping does no per-token work (see benchmarks/ for numbers).
    start = time.perf_counter()
    for _ in range(20):
        tk.Encoding.from_cartridge(saved)
    per_load_ms = (time.perf_counter() - start) / 20 * 1e3
    print(f"cartridge load: {per_load_ms:.3f} ms")


def test_header_fields(saved):
    info = native.cartridge_info(str(saved), True)
    assert info["format_version"] == (1, 0)
    assert info["unicode_version"] == "16.0.0"
    assert info["checksum_ok"]
    assert info["file_size"] == os.path.getsize(saved)
    ids = [s["id"] for s in info["sections"]]
    assert {"TKHD", "META", "TOKO", "TOKB", "TOKK", "BTRI", "BTVA", "STRI", "STVA", "SPID", "BSPL", "BSPR", "BPAR"} <= set(ids)
    for s in info["sections"]:
        assert s["offset"] % 64 == 0
    meta = json.loads(native.section_bytes(str(saved), "META"))
    assert meta["source"]["sha256"] == "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
    assert meta["unicode_version"] == "16.0.0"


def _damaged(saved, tmp_path, mutate) -> str:
    data = bytearray(saved.read_bytes())
    mutate(data)
    out = tmp_path / "damaged.dat"
    out.write_bytes(bytes(data))
    return str(out)


def checksum(data: bytes) -> int:
    """The cartridge checksum as docs/cartridge.md specifies it, from plain XXH64 (whose
    implementation the vectors above check)."""
    body = data[64:]
    q = len(body) // 4 // 32 * 32
    parts = [body[:q], body[q : 2 * q], body[2 * q : 3 * q], body[3 * q :]]
    digests = b"".join(struct.pack("<Q", native.xxhash64(part, seed)) for seed, part in enumerate(parts))
    return native.xxhash64(digests, native.xxhash64(data[:56], 0))


def test_checksum_follows_the_spec(saved):
    data = saved.read_bytes()
    assert checksum(data) == struct.unpack_from("<Q", data, 56)[0]
    assert native.cartridge_info(str(saved), True)["checksum"] == checksum(data)


def _restamp(data: bytearray) -> None:
    """Recomputes the checksum, as a hostile file would, so validation past the hash is exercised."""
    data[56:64] = struct.pack("<Q", checksum(bytes(data)))


def _load_and_use(path, where: str, message: str) -> None:
    """Loads `path` and encodes with it, checking that the ValueError naming `message` comes at
    `where`: "load" (header and section table: O(1) checks) or "first use" (checksum and the
    O(n_ids) table checks, deferred from load; docs/cartridge.md "Validation")."""
    if where == "load":
        with pytest.raises(ValueError, match=message):
            tk.Encoding.from_cartridge(path)
        return
    enc = tk.Encoding.from_cartridge(path)
    for _ in range(2):  # the failure is remembered: every use raises, none half-works
        with pytest.raises(ValueError, match=message):
            enc.encode("hello world")
    with pytest.raises(ValueError, match=message):
        enc.decode([1, 2])
    # A second load of the same (unchanged) file fails again: only good files are remembered.
    with pytest.raises(ValueError, match=message):
        tk.Encoding.from_cartridge(path).encode_ordinary("hello")
    # verify=True moves the same failure to load.
    with pytest.raises(ValueError, match=message):
        tk.Encoding.from_cartridge(path, verify=True)


@pytest.mark.parametrize(
    "mutate,message,where",
    [
        (lambda d: d.__setitem__(slice(0, 8), b"NOTACART"), "bad magic", "load"),
        (lambda d: d.__setitem__(slice(8, 10), struct.pack("<H", 9)), "format version 9", "load"),
        (lambda d: d.__setitem__(len(d) // 2, d[len(d) // 2] ^ 0x10), "checksum mismatch", "first use"),
        (lambda d: d.__delitem__(slice(len(d) - 100, len(d))), "truncated", "load"),
        (lambda d: d.__delitem__(slice(40, len(d))), "smaller than the 64-byte header", "load"),
        (lambda d: d.extend(b"\0" * 64), "truncated or padded", "load"),
    ],
    ids=["magic", "version", "bitflip", "truncated", "tiny", "padded"],
)
def test_damaged_files_raise_value_error(saved, tmp_path, mutate, message, where):
    _load_and_use(_damaged(saved, tmp_path, mutate), where, message)


def _section_entry(data: bytearray, section: str) -> int:
    count = struct.unpack_from("<I", data, 16)[0]
    for i in range(count):
        at = 64 + 32 * i
        if bytes(data[at : at + 4]) == section.encode():
            return at
    raise AssertionError(section)


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda d: struct.pack_into("<Q", d, _section_entry(d, "TOKB") + 16, 1 << 40), "runs past the end"),
        (lambda d: struct.pack_into("<Q", d, _section_entry(d, "TOKB") + 8, 65), "not 64-byte aligned"),
        (lambda d: d.__setitem__(slice(_section_entry(d, "META"), _section_entry(d, "META") + 4), b"TOKB"), "appears twice"),
        (lambda d: d.__setitem__(slice(_section_entry(d, "SPID"), _section_entry(d, "SPID") + 4), b"ZZZZ"), "does not understand"),
        (lambda d: struct.pack_into("<I", d, 16, 100000), "implausible"),
        (lambda d: struct.pack_into("<Q", d, _section_entry(d, "STRI") + 8, struct.unpack_from("<Q", d, _section_entry(d, "BTRI") + 8)[0]), "overlap"),
    ],
    ids=["size", "align", "duplicate", "unknown-required", "count", "overlap"],
)
def test_hostile_files_with_valid_checksum(saved, tmp_path, mutate, message):
    def mutate_and_restamp(d):
        mutate(d)
        _restamp(d)

    path = _damaged(saved, tmp_path, mutate_and_restamp)
    with pytest.raises(ValueError, match=message):
        tk.Encoding.from_cartridge(path)


def _section_offset(data: bytearray, section: str) -> int:
    return struct.unpack_from("<Q", data, _section_entry(data, section) + 8)[0]


@pytest.mark.parametrize(
    "mutate,message",
    [
        # TOKO out of order (its ends still span TOKB): the encoders would take a negative length.
        (lambda d: struct.pack_into("<I", d, _section_offset(d, "TOKO") + 4 * 300, 1 << 30), "TOKO offsets are not sorted"),
        # A split naming a child whose bytes do not add up to the token.
        (lambda d: struct.pack_into("<I", d, _section_offset(d, "BSPL") + 4 * 1000, 5), "BSPL/BSPR"),
    ],
    ids=["toko-order", "split"],
)
def test_hostile_tables_fail_at_first_use(saved, tmp_path, mutate, message):
    """The O(n_ids) table checks run on first use (once per file), not at load: a crafted file with
    a valid checksum loads, and then every use raises ValueError."""
    def mutate_and_restamp(d):
        mutate(d)
        _restamp(d)

    _load_and_use(_damaged(saved, tmp_path, mutate_and_restamp), "first use", message)


def test_loading_reads_no_section(saved, tmp_path):
    """Loading is O(1): a file whose every section is garbage (checksum re-stamped) but whose header,
    table and META are intact loads; its first use refuses it."""
    data = bytearray(saved.read_bytes())
    for name in ("TOKO", "BSPL", "BSPR"):
        at, size = _section_offset(data, name), struct.unpack_from("<Q", data, _section_entry(data, name) + 16)[0]
        data[at + 4 : at + size - 4] = bytes(random.Random(1).randrange(256) for _ in range(size - 8))
    _restamp(data)
    path = tmp_path / "garbage.dat"
    path.write_bytes(bytes(data))
    enc = tk.Encoding.from_cartridge(path)
    assert enc.n_vocab > 0
    with pytest.raises(ValueError):
        enc.encode("hello world")


def test_replaced_by_rename_is_checked_again(saved, tmp_path):
    """The memo of checked files is keyed by (dev, inode, size, mtime, ctime): a good file loaded and
    used, then a damaged one renamed over it, is refused on first use; a good one renamed back works."""
    path = tmp_path / "swap.dat"
    good = saved.read_bytes()
    path.write_bytes(good)
    first = tk.Encoding.from_cartridge(path)
    expected = first.encode("hello world")
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0x10
    tmp = tmp_path / "swap.tmp"
    tmp.write_bytes(bytes(bad))
    os.replace(tmp, path)
    with pytest.raises(ValueError, match="checksum mismatch"):
        tk.Encoding.from_cartridge(path).encode("hello world")
    assert first.encode("hello world") == expected  # the old mapping is intact
    tmp.write_bytes(good)
    os.replace(tmp, path)
    assert tk.Encoding.from_cartridge(path).encode("hello world") == expected


def test_random_bitflips_never_crash(saved, tmp_path):
    """Flip bits all over the file (re-stamping the checksum so the structure is what gets tested):
    loading and using it either raises ValueError or works; it never crashes."""
    rng = random.Random(5)
    original = bytearray(saved.read_bytes())
    for trial in range(40):
        data = bytearray(original)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(data)) if trial % 2 else rng.randrange(64 + 32 * 20)
            data[i] ^= 1 << rng.randrange(8)
        _restamp(data)
        path = tmp_path / f"flip{trial}.dat"
        path.write_bytes(bytes(data))
        try:
            enc = tk.Encoding.from_cartridge(path)
        except ValueError:
            continue
        for text in ["hello world", "中文 <|endoftext|> 123", "x" * 1000]:
            try:
                ids = enc.encode(text, allowed_special="all")
                enc.decode(ids)
            except (ValueError, KeyError):
                pass


def test_missing_file_is_clear():
    with pytest.raises(ValueError, match="cannot open cartridge"):
        tk.Encoding.from_cartridge("/nonexistent/x.dat")


def test_cache_written_atomically_and_reused(tmp_path, monkeypatch):
    from crayon_hf.tiktoken import registry

    monkeypatch.setenv("CRAYON_HF_CACHE", str(tmp_path))
    monkeypatch.setattr(registry, "ENCODINGS", {})
    enc = registry.get_encoding("r50k_base")
    files = os.listdir(tmp_path)
    assert len(files) == 1 and files[0].startswith("r50k_base-") and files[0].endswith(".dat")
    assert enc.cartridge_path == str(tmp_path / files[0])
    # A damaged cache entry is rebuilt with a warning, not trusted. (Replaced by rename, as every
    # writer must: truncating a mapped file in place is outside the policy in docs/cartridge.md.)
    (tmp_path / "garbage").write_bytes(b"garbage")
    os.replace(tmp_path / "garbage", tmp_path / files[0])
    monkeypatch.setattr(registry, "ENCODINGS", {})
    with pytest.warns(UserWarning, match="rebuilding damaged"):
        again = registry.get_encoding("r50k_base")
    assert again.encode("hello") == enc.encode("hello")
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_parallel_first_use_races(tmp_path):
    """Several processes building the same cartridge at once all succeed with identical results."""
    import subprocess
    import sys

    code = (
        "import crayon_hf.tiktoken as tk; print(tk.get_encoding('cl100k_base').encode('race condition'))"
    )
    env = dict(os.environ, CRAYON_HF_CACHE=str(tmp_path))
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tmp_path, stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(set(outs)) == 1
    assert [f for f in os.listdir(tmp_path) if f.endswith(".dat")]
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
