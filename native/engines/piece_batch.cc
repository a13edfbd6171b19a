#include "engines/piece_batch.h"

#include <algorithm>
#include <stdexcept>

#include "core/parallel.h"

namespace crayon {

namespace {

// Runs fn(i) for i in [0, n) on threads, a block of indexes per task.
template <class F>
void for_blocks(size_t n, size_t threads, F&& fn) {
  constexpr size_t kBlock = 4096;
  parallel_for((n + kBlock - 1) / kBlock, threads, [&](size_t block) {
    const size_t end = std::min(n, (block + 1) * kBlock);
    for (size_t i = block * kBlock; i < end; ++i) fn(i);
  });
}

}  // namespace

PieceBatch split_batch(const TiktokenEngine& e, const std::vector<std::string_view>& texts,
                       const std::vector<uint8_t>& allowed, const std::vector<uint8_t>& disallowed, bool ordinary,
                       size_t threads) {
  PieceBatch b;
  const size_t n_docs = texts.size();
  std::vector<uint64_t> base(n_docs + 1, 0);
  for (size_t d = 0; d < n_docs; ++d) base[d + 1] = base[d] + texts[d].size();
  if (base[n_docs] > kMaxBatchBytes) throw std::length_error("a piece batch holds less than 4 GiB of text");

  const bool check = std::find(disallowed.begin(), disallowed.end(), 1) != disallowed.end();
  const std::vector<uint8_t> none;
  const std::vector<uint8_t>& allow = ordinary ? none : allowed;
  std::vector<int32_t> denied(n_docs, -1);
  std::vector<std::vector<BatchPiece>> per_doc(n_docs);
  b.text.resize(base[n_docs]);
  parallel_for(n_docs, threads, [&](size_t d) {
    if (check) {
      const SpecialMatch m = e.find_special(texts[d], disallowed);
      if (m.index >= 0) {
        denied[d] = m.index;
        return;
      }
    }
    std::copy(texts[d].begin(), texts[d].end(), b.text.begin() + static_cast<std::ptrdiff_t>(base[d]));
    e.split_pieces(texts[d], base[d], allow, per_doc[d]);
  });
  for (size_t d = 0; d < n_docs; ++d) {
    if (denied[d] >= 0) {
      PieceBatch out;
      out.denied_text = static_cast<int64_t>(d);
      out.denied_special = denied[d];
      return out;
    }
  }
  b.doc_pieces.assign(n_docs + 1, 0);
  for (size_t d = 0; d < n_docs; ++d) b.doc_pieces[d + 1] = b.doc_pieces[d] + per_doc[d].size();
  b.pieces.resize(b.doc_pieces[n_docs]);
  parallel_for(n_docs, threads, [&](size_t d) {
    std::copy(per_doc[d].begin(), per_doc[d].end(), b.pieces.begin() + static_cast<std::ptrdiff_t>(b.doc_pieces[d]));
    std::vector<BatchPiece>().swap(per_doc[d]);
  });
  for (size_t i = 0; i < b.pieces.size(); ++i) {
    const uint32_t len = b.pieces[i].len;
    if (!(len & kSpecialPiece) && len > kDevicePieceMax) b.long_pieces.push_back(static_cast<uint32_t>(i));
  }
  return b;
}

void encode_reference(const TiktokenEngine& e, const PieceBatch& b, const uint32_t* indexes, size_t n,
                      uint32_t* slots, int32_t* counts, size_t threads) {
  const uint8_t* text = reinterpret_cast<const uint8_t*>(b.text.data());
  parallel_for(n, threads, [&](size_t k) {
    thread_local std::vector<uint32_t> ids;
    const uint32_t i = indexes[k];
    const BatchPiece p = b.pieces.at(i);
    ids.clear();
    if (p.len & kSpecialPiece) {
      ids.push_back(p.len & ~kSpecialPiece);
    } else {
      e.encode_piece(text + p.start, p.len, ids);
    }
    std::copy(ids.begin(), ids.end(), slots + p.start);  // at most p.len ids: BPE never grows a piece
    counts[i] = static_cast<int32_t>(ids.size());
  });
}

void encode_batch_staged(const TiktokenEngine& e, const PieceBatch& b, size_t threads, std::vector<uint32_t>& ids,
                         std::vector<int64_t>& offsets) {
  const size_t n = b.pieces.size();
  std::vector<uint32_t> slots(b.text.size());
  std::vector<int32_t> counts(n);
  const piece::PieceTables& tables = e.piece_tables();
  const EncodeStage encode{&tables, reinterpret_cast<const uint8_t*>(b.text.data()), b.pieces.data(), slots.data(),
                           counts.data()};
  for_blocks(n, threads, encode);

  std::vector<uint32_t> left;  // what the stage left to the CPU engine
  for (size_t i = 0; i < n; ++i) {
    if (counts[i] < 0) left.push_back(static_cast<uint32_t>(i));
  }
  encode_reference(e, b, left.data(), left.size(), slots.data(), counts.data(), threads);

  std::vector<uint32_t> positions(n + 1, 0);
  for (size_t i = 0; i < n; ++i) positions[i + 1] = positions[i] + static_cast<uint32_t>(counts[i]);
  ids.resize(positions[n]);
  for_blocks(n, threads, GatherStage{b.pieces.data(), slots.data(), positions.data(), ids.data()});
  offsets.resize(b.doc_pieces.size());
  for_blocks(b.doc_pieces.size(), threads, DocOffsetsStage{b.doc_pieces.data(), positions.data(), offsets.data()});
}

}  // namespace crayon
