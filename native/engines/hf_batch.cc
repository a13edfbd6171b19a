#include "engines/hf_batch.h"

#include <algorithm>

namespace crayon {

namespace {

enum Row : size_t { kId, kType, kStart, kEnd, kWord, kSpecial, kAttn };

void write_block(const SpecialBlock& block, int64_t* out, size_t stride, size_t at) {
  for (size_t r = 0; r < kEncodingRows; ++r)
    for (size_t c = 0; c < block.cols; ++c) out[r * stride + at + c] = block.at(r, c);
}

// Token `src` of `doc` (the k-th kept one): its offsets, trimmed as byte_level::process_offsets
// does when the layout asks for it.
void trimmed_offsets(const RawEncoding& doc, const BatchLayout& layout, size_t k, size_t src, int64_t* start_out,
                     int64_t* end_out) {
  const uint32_t id = doc.ids[src];
  // An ids-only encoding (RawEncoding::with_offsets false) has no offsets: zeros stand in; the
  // caller asked for none.
  const bool located = src < doc.starts.size();
  int64_t start = located ? doc.starts[src] : 0, end = located ? doc.ends[src] : 0;
  if (layout.trim_lead != nullptr && id < layout.trim_size) {
    // The first token keeps the one space the pre-tokenizer added.
    int64_t lead = layout.trim_lead[id];
    const int64_t trail = layout.trim_trail[id];
    if (layout.add_prefix_space && lead == 1 && (k == 0 || start == 0)) lead = 0;
    const int64_t new_start = lead > 0 ? std::min(start + lead, end) : start;
    if (trail > 0 && end >= trail) end = std::max(end - trail, new_start);
    start = new_start;
  }
  *start_out = start;
  *end_out = end;
}

}  // namespace

void write_document(const RawEncoding& doc, const BatchLayout& layout, size_t i, int64_t* out, size_t stride,
                    size_t at) {
  write_block(layout.prefix, out, stride, at);
  at += layout.prefix.cols;
  const size_t n = doc.ids.size();
  const size_t keep = static_cast<size_t>(layout.keep[i]);
  const size_t from = layout.keep_tail ? n - keep : 0;
  for (size_t k = 0; k < keep; ++k) {
    const size_t src = from + k;
    const size_t col = at + k;
    int64_t start, end;
    trimmed_offsets(doc, layout, k, src, &start, &end);
    // Words are absent from an ids-only encoding too: -1 stands in.
    const bool located = src < doc.words.size();
    out[kId * stride + col] = doc.ids[src];
    out[kType * stride + col] = layout.sequence_type >= 0 ? layout.sequence_type : 0;
    out[kStart * stride + col] = start;
    out[kEnd * stride + col] = end;
    out[kWord * stride + col] = located ? static_cast<int64_t>(doc.words[src]) : -1;
    out[kSpecial * stride + col] = 0;
    out[kAttn * stride + col] = 1;
  }
  write_block(layout.suffix, out, stride, at + keep);
}

void write_document_flat(const RawEncoding& doc, const BatchLayout& layout, size_t i, uint32_t* ids,
                         int64_t* offsets, size_t at) {
  auto block = [&](const SpecialBlock& b) {
    for (size_t c = 0; c < b.cols; ++c, ++at) {
      ids[at] = static_cast<uint32_t>(b.at(kId, c));
      if (offsets == nullptr) continue;
      offsets[2 * at] = b.at(kStart, c);
      offsets[2 * at + 1] = b.at(kEnd, c);
    }
  };
  block(layout.prefix);
  const size_t n = doc.ids.size();
  const size_t keep = static_cast<size_t>(layout.keep[i]);
  const size_t from = layout.keep_tail ? n - keep : 0;
  if (offsets == nullptr) {
    std::copy_n(doc.ids.data() + from, keep, ids + at);
    at += keep;
  } else {
    for (size_t k = 0; k < keep; ++k, ++at) {
      const size_t src = from + k;
      ids[at] = doc.ids[src];
      trimmed_offsets(doc, layout, k, src, &offsets[2 * at], &offsets[2 * at + 1]);
    }
  }
  block(layout.suffix);
}

void write_padding(const BatchPadding& padding, size_t n, int64_t* out, size_t stride, size_t row_start) {
  const size_t pads = padding.length - n;
  const size_t first = padding.left ? row_start : row_start + n;
  const int64_t values[kEncodingRows] = {padding.pad_id, padding.pad_type_id, 0, 0, -1, 1, 0};
  for (size_t r = 0; r < kEncodingRows; ++r) std::fill_n(out + r * stride + first, pads, values[r]);
}

}  // namespace crayon
