// Packed documents: many documents in one sequence, as long-context training feeds them (Llama 3's document mask,
// Transformer Engine's THD format, whose cu_seqlens are the bounds here).
//
//   --docs 24,8,32      three documents of 24, 8 and 32 tokens, in that order (they sum to S)
//   --docs random:K     K documents of seeded lengths: multiples of 2C when S is (so that per-document zigzag can
//                       cut each into 2C chunks), at least one such unit each, summing to S
//   --docs sample:K     K document lengths drawn with the seed from a measured distribution of document lengths
//                       (MagiAttention's, shipped in data/magiattention: a histogram of ranges and counts), scaled so
//                       that they sum to S, in multiples of 2C when S is, at least one such unit each
//   --docs sample:K:FILE   the same from a distribution of one's own in the same CSV format
//   --pad-docs          per-document zigzag cuts every document into 2C chunks; a length that is not a multiple of
//                       2C is padded up to one (Transformer Engine's cu_seqlens_padded). The padding sits at the end
//                       of its document, is a document of its own for the mask (no real token sees it, it sees no
//                       real token) and is left out of the check.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/mask.hpp"
#include "sim/core/recorder.hpp"

namespace cpsim {

// What the flags asked for (resolved into Documents once S and C are known).
struct DocSpec {
  std::vector<std::int64_t> lengths;  // listed lengths (real tokens), or empty
  std::int64_t random = 0;            // random:K: K documents of seeded lengths
  std::uint64_t seed = 1;             // the lengths' seed (random:K)
  bool pad = false;                   // --pad-docs
  std::int64_t sample = 0;            // sample:K: K documents drawn from a length distribution
  // The distribution sample:K draws from, flat: (first length, last length, count) per range; read when parsed.
  std::vector<std::int64_t> distribution;
  std::string distribution_file;  // sample:K:FILE: the file named; empty: the shipped one
  bool any() const { return !lengths.empty() || random > 0 || sample > 0; }
  bool operator==(const DocSpec&) const = default;
};

// Parses --docs: "24,8,32", "random:K", "sample:K" or "sample:K:FILE" (reading the distribution). Throws UsageError
// naming the accepted forms, or the line of the file that is not a range and a count.
DocSpec parse_docs(const std::string& text);

struct Documents {
  std::vector<std::int64_t> lengths;  // real tokens per document, in sequence order
  std::vector<std::int64_t> padded;   // each document's tokens in the sequence: its length and its padding

  bool empty() const { return lengths.empty(); }
  std::int64_t count() const { return static_cast<std::int64_t>(lengths.size()); }
  std::int64_t total() const;    // S: every document with its padding
  std::int64_t padding() const;  // padding tokens in all
  std::int64_t shortest() const;
  std::vector<std::int64_t> starts() const;  // where each (padded) document starts; then S
  // The mask's bounds: each document's real tokens, and each padding run as a document of its own.
  std::vector<std::int64_t> mask_bounds() const;
  std::vector<Span> padding_spans() const;  // the positions of the padding
  // "3 documents (24, 8, 32 tokens; shortest 8)", with the padding when there is some.
  std::string describe() const;
};

// The documents of a sequence of S tokens on C ranks. Listed lengths must sum to S, or (with pad) be padded to
// multiples of 2C that sum to S; random:K cuts S into K seeded multiples of 2C (of 1 when S % 2C != 0).
// Throws UsageError naming the constraint and a fix.
Documents resolve_documents(const DocSpec& spec, std::int64_t seq, int ranks);

// The document-length distribution as a CSV (MagiAttention's format: a header line, then one line per range,
// "\"[lo, hi]\",count,..."), flat as DocSpec::distribution. `source` names the file in errors.
std::vector<std::int64_t> parse_length_distribution(const std::string& csv, const std::string& source);
// The path of the shipped distribution (data/magiattention/doc_length_distribution.csv).
std::string shipped_length_distribution();

// The sequence length the listed lengths make on C ranks (with their padding when spec.pad).
std::int64_t documents_seq(const DocSpec& spec, int ranks);

// The mask of a problem: causal or full, the documents (when any) and the window (0: none).
Mask make_mask(bool causal, std::int64_t window, const Documents& docs);

// The mask in words as the documents were given: Mask::describe counts each padding run as a document of its own
// ("causal, 7 documents" for 4 padded documents), this says "causal, 4 documents + 3 padding runs masked apart".
std::string describe_mask(const Mask& mask, const Documents& docs);

}  // namespace cpsim
