// BertNormalizer and BertPreTokenizer of tokenizers 0.23.3, reproduced to the byte and to the
// alignment (normalizers/bert.rs, pre_tokenizers/bert.rs).
//
//   original ─▶ NormalizedText ─normalize_bert─▶ text + alignments ─pretokenize_bert─▶ pieces
//      └── normalize_bert_same_length (one output byte per input byte) ──┘
//
// BertNormalizer rewrites the NormalizedString up to five times, in this order:
//   clean_text            filter(not NUL / U+FFFD / is_control), then map(is_whitespace -> ' ')
//   handle_chinese_chars  transform: each CJK char c -> (' ', 0) (c, +1) (' ', +1)
//   strip_accents         nfd(), then filter(not Mn)      (tokenizers: strip_accents null means
//                                                          "= lowercase"; the caller resolves it)
//   lowercase             char::to_lowercase per char (normalize.h's normalize_lowercase)
// Under tokenizers' transform rules (normalize.h) every rewrite but NFD gives each output char the
// alignment of the char it came from: a kept or mapped char keeps its own, an inserted char takes
// the byte before the read position, which is its source's last byte. NFD's positional quirk stays
// inside a run of combining marks (from one NFD boundary to the next). So the chain is computed in
// one left-to-right pass, each char carrying its source's alignment, with only the runs that NFD
// really changes going through normalize_nfd (see bert.cc).
//
// BertPreTokenizer splits on char::is_whitespace (removed), then isolates every
// `is_ascii_punctuation || is_punctuation` char: the pieces are the maximal runs of other chars and
// each punctuation char alone.
//
// The char classes (bert_tables.h) are probed from tokenizers: is_control, Mn and punctuation come
// from the unicode_categories crate's Unicode 8.0 tables, NFD from Unicode 9.0, lowercase and
// whitespace from Rust's std (Unicode 16.0); docs/normalizers.md lists what that changes.
//
// Poisoned text (normalize.h: the first byte's alignment is empty, after Prepend("") for example)
// takes the reference path, which runs tokenizers' own pair sequences through transform_chars and
// throws NormalizerPanic where tokenizers panics.
//
// Bounds: linear time in the text (a run of n combining marks costs O(n log n) in NFD); memory is
// the output plus the longest run of combining marks. Offsets are uint32 (text < 4 GiB). Invalid
// UTF-8 bytes are carried through unchanged as one-byte word characters, never read past.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/normalize.h"

namespace crayon {

struct BertNormalizerOptions {
  bool clean_text, handle_chinese_chars, strip_accents, lowercase;
};

// True only when normalize_bert would leave `text` and its alignments unchanged (it may answer false
// for some unchanged texts: a mark that NFD would reorder, say). Like normalize.h's *_is_identity it
// judges the text alone. ASCII is checked eight bytes at a time.
bool bert_is_identity(std::string_view text, const BertNormalizerOptions&);

void normalize_bert(NormalizedText& t, const BertNormalizerOptions&);

// The hot path for original text (identity alignments): when every char of `text` comes out as
// exactly one char of the same byte length (ASCII apart from the control chars clean_text removes;
// unchanged non-ASCII; same-length case or accent mappings such as Cyrillic й -> и), writes the
// normalized bytes to `out` (resized to text.size()) and returns true: normalized byte i then has
// the alignment of original byte i's char, exactly as from_original(text) + normalize_bert gives.
// Returns false otherwise (out unspecified). `out` must not alias `text`.
//
// `separators_left` (handle_chinese_chars only): where it is given, chars whose only effect is to
// separate pre-tokens do not make the answer false. A CJK char (handle_chinese_chars) comes out as itself, strip_accents and
// lowercase applied (it must stay a CJK char, and no other char may become one), without the two
// spaces around it; a whitespace char that clean_text maps to ' ' (U+3000, U+00A0) stays as it is.
// *separators_left is set when one was. Those spaces are whitespace to BertPreTokenizer, as the
// whitespace chars are, so a caller that splits the result with pretokenize_bert(..., isolate_cjk =
// true), and looks for no normalized added token in it, gets the pieces (bytes and original ranges)
// of normalize_bert's text (tests/native/bert_driver.cc checks this on every case).
//
// `resume` (may be null): where it returns false, a position from which normalize_bert_text may
// take the text up (0: from the start), `out` holding the normalized bytes of what comes before.
bool normalize_bert_same_length(std::string_view text, const BertNormalizerOptions&, std::string& out,
                                bool* separators_left = nullptr, size_t* resume = nullptr);

// The text normalize_bert makes of original text (whose every byte carries its character's
// alignment, as NormalizedText::from_original gives it) without its alignments, for callers that
// need ids only; false (out unspecified) where the fused pass leaves the text to the reference
// (invalid UTF-8): then call normalize_bert. `from`: 0, or the resume position a failed
// normalize_bert_same_length gave on this text and `out` (the bytes before it are kept).
bool normalize_bert_text(std::string_view text, const BertNormalizerOptions&, std::string& out, size_t from = 0);

// BertPreTokenizer: appends the [start, end) byte ranges of the pre-tokens of `text`, in order.
// isolate_cjk: each CJK char (handle_chinese_chars' class) is a pre-token of its own, as if
// surrounded by spaces (see normalize_bert_same_length).
void pretokenize_bert(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& pieces,
                      bool isolate_cjk = false);

// The slow, obviously-faithful twins, test oracles for the functions above: normalize_bert builds
// tokenizers' pair sequences step by step and applies them with transform_chars (NFD and lowercase
// through normalize.h's reference twins); pretokenize_bert runs tokenizers' two splits literally.
namespace reference {
void normalize_bert(NormalizedText& t, const BertNormalizerOptions&);
void pretokenize_bert(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& pieces);
}  // namespace reference

}  // namespace crayon
