#pragma once

// "Did you mean …?": the one edit distance every suggestion uses (unknown config keys in the
// daemon, unknown commands in ktctl). Pure.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ktesio::contract {

// Optimal string alignment distance: insertions, deletions, substitutions and adjacent
// transpositions each cost 1 ("modle" is one edit from "model").
size_t EditDistance(std::string_view a, std::string_view b);

// How far a word of `length` characters may be from a suggestion: 1 up to 6, 2 up to 12, else 3.
size_t SuggestionThreshold(size_t length);

// The candidate nearest to `word` within SuggestionThreshold(word.size()), or "" (the first of
// equally near ones).
std::string Nearest(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace ktesio::contract
