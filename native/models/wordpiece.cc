#include "models/wordpiece.h"

#include <stdexcept>
#include <utility>

namespace crayon {

namespace {

// Characters of well-formed UTF-8: the bytes that are not continuation bytes.
size_t count_chars(const uint8_t* s, size_t n) {
  size_t chars = 0;
  for (size_t i = 0; i < n; ++i) chars += (s[i] & 0xC0) != 0x80;
  return chars;
}

}  // namespace

WordPieceModel::WordPieceModel(DoubleArrayView vocab, uint32_t n_ids, WordPieceOptions options)
    : vocab_(vocab), n_ids_(n_ids), options_(std::move(options)) {
  if (options_.unk_id >= n_ids_) throw std::invalid_argument("WordPiece: unk_id is not a vocabulary id");
  if (vocab_.size() == 0) return;  // an empty trie: every piece is unknown
  continuing_root_ = vocab_.walk(DoubleArrayView::kRoot,
                                 reinterpret_cast<const uint8_t*>(options_.prefix.data()),
                                 options_.prefix.size());
}

int64_t WordPieceModel::lookup(const uint8_t* s, size_t n) const {
  if (vocab_.size() == 0) return -1;
  const int32_t v = vocab_.find(s, n);
  return v >= 0 && static_cast<uint32_t>(v) < n_ids_ ? v : -1;
}

void WordPieceModel::encode_word(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const {
  const uint32_t unk = options_.unk_id;
  // Characters never outnumber bytes, so short pieces skip the count.
  if (n > options_.max_input_chars_per_word && count_chars(piece, n) > options_.max_input_chars_per_word) {
    out.push_back({unk, 0, static_cast<uint32_t>(n)});
    return;
  }
  const size_t mark = out.size();
  int32_t from = vocab_.size() == 0 ? -1 : DoubleArrayView::kRoot;
  size_t pos = 0;
  while (pos < n) {
    size_t end = 0;
    uint32_t id = 0;
    int32_t node = from;
    for (size_t i = pos; i < n && node >= 0; ++i) {
      node = vocab_.child(node, piece[i]);
      if (node < 0) break;
      const uint32_t v = static_cast<uint32_t>(vocab_.value_at(node));  // -1 wraps past n_ids
      if (v < n_ids_) {
        end = i + 1;
        id = v;
      }
    }
    if (end == 0) {  // nothing matches here: the whole piece is one unknown token
      out.resize(mark);
      out.push_back({unk, 0, static_cast<uint32_t>(n)});
      return;
    }
    out.push_back({id, static_cast<uint32_t>(pos), static_cast<uint32_t>(end)});
    pos = end;
    from = continuing_root_;
  }
}

void WordPieceModel::encode_word_reference(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const {
  const uint32_t unk = options_.unk_id;
  if (count_chars(piece, n) > options_.max_input_chars_per_word) {
    out.push_back({unk, 0, static_cast<uint32_t>(n)});
    return;
  }
  std::vector<HfToken> tokens;
  size_t start = 0;
  while (start < n) {
    size_t end = n;
    int64_t found = -1;
    while (start < end) {
      std::string sub(reinterpret_cast<const char*>(piece) + start, end - start);
      if (start > 0) sub = options_.prefix + sub;
      found = lookup(reinterpret_cast<const uint8_t*>(sub.data()), sub.size());
      if (found >= 0) break;
      // Drop the last character of the candidate.
      do --end; while (end > start && (piece[end] & 0xC0) == 0x80);
    }
    if (found < 0) {
      out.push_back({unk, 0, static_cast<uint32_t>(n)});
      return;
    }
    tokens.push_back({static_cast<uint32_t>(found), static_cast<uint32_t>(start), static_cast<uint32_t>(end)});
    start = end;
  }
  out.insert(out.end(), tokens.begin(), tokens.end());
}

}  // namespace crayon
