// The byte-level BPE model: a vocabulary of byte strings and ranked merges. A piece (the bytes
// of one pre-token) starts as one symbol per byte and the lowest-ranked adjacent pair that has
// a merge is merged, leftmost first, until none is left: GPT-2's algorithm, and Hugging Face's
// (their heap pops the lowest (rank, position)). Results for short pieces are cached.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"

namespace flashserve::text {

class BpeModel {
 public:
  struct Options {
    bool ignore_merges = false;  // a piece that is a whole vocabulary entry is that entry
    int32_t unk_id = -1;         // for a byte whose symbol is missing; -1: such bytes are dropped
    bool fuse_unk = false;       // consecutive unknowns become one unk
  };

  BpeModel();
  ~BpeModel();
  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;

  // `tokens[id]` are the vocabulary's entries as raw bytes (byte-level strings already decoded;
  // entries that are not byte-level strings are given as an empty optional: they take no part
  // in merges); `merges` are (left id, right id) in rank order. A merge whose parts or result
  // are not in the vocabulary is INVALID_ARGUMENT.
  Status init(const std::vector<std::pair<bool, std::string>>& tokens,
              const std::vector<std::pair<int32_t, int32_t>>& merges, const Options& options);

  // Appends the ids of one piece (raw bytes).
  void encode_piece(std::string_view piece, std::vector<int32_t>* ids) const;

  // The id of raw bytes `bytes` when they are one vocabulary entry, else -1.
  int32_t find(std::string_view bytes) const;

  // The uncached merge loop (for tests: the cache must not change a result).
  void encode_piece_uncached(std::string_view piece, std::vector<int32_t>* ids) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashserve::text
