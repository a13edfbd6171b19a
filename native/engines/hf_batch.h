// A batch of encoded documents turned into the arrays a caller hands to a model: each document
// truncated to a prefix or suffix, wrapped in the post-processor's special-token blocks, its
// offsets trimmed like the ByteLevel processor does, and padded into one (7, B, L) block, in one
// pass per document. The row order is crayon_hf.Encoding's: ID, TYPE, START, END, WORD, SPECIAL,
// ATTN. The Python side (crayon_hf/_hf/batch.py) decides the parameters and keeps the
// per-document path as the reference; tests compare the two.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engines/hf_engine.h"

namespace crayon {

constexpr size_t kEncodingRows = 7;

// Special tokens around the sequence: `cols` columns of a (7, cols) row-major block.
struct SpecialBlock {
  const int64_t* data = nullptr;
  size_t cols = 0;
  int64_t at(size_t row, size_t col) const { return data[row * cols + col]; }
};

struct BatchLayout {
  std::vector<int64_t> keep;    // tokens kept per document (<= its length)
  bool keep_tail = false;       // left truncation keeps the last tokens
  SpecialBlock prefix, suffix;
  int64_t sequence_type = -1;   // type id written over the sequence's tokens; -1 keeps them
  // ByteLevel offset trimming: leading/trailing space counts per id (null: no trimming).
  const int64_t* trim_lead = nullptr;
  const int64_t* trim_trail = nullptr;
  size_t trim_size = 0;
  bool add_prefix_space = false;
};

struct BatchPadding {
  size_t length = 0;  // every document is at most this long (checked by the caller)
  bool left = false;
  int64_t pad_id = 0, pad_type_id = 0;
};

// Final length of document i under `layout`.
inline size_t final_length(const BatchLayout& layout, size_t i) {
  return layout.prefix.cols + static_cast<size_t>(layout.keep[i]) + layout.suffix.cols;
}

// Writes document i (char offsets already in docs[i]) into `out`, a (7, stride) row-major block,
// starting at column `at`.
void write_document(const RawEncoding& doc, const BatchLayout& layout, size_t i, int64_t* out, size_t stride,
                    size_t at);

// Document i as `encode_batch_to_numpy` wants it, without the 7-row block: ids at ids[at, at + n)
// and (start, end) pairs at offsets[2 * at, 2 * (at + n)), equal to write_document's ID, START and
// END rows. 12 bytes per token less than the block, and nothing else is allocated. A null
// `offsets` writes the ids alone.
void write_document_flat(const RawEncoding& doc, const BatchLayout& layout, size_t i, uint32_t* ids,
                         int64_t* offsets, size_t at);

// Fills the pad columns of row b of a (7, B, L) block around a document of length n.
void write_padding(const BatchPadding& padding, size_t n, int64_t* out, size_t stride, size_t row_start);

}  // namespace crayon
