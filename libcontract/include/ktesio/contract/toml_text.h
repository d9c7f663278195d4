#pragma once

// Writing TOML text: the one quoter every writer uses (the daemon's instance files and exports,
// libcontract's document merge, the Conformance Test Kit's generated manifests). Pure.

#include <string>
#include <string_view>

namespace ktesio::contract {

// `value` as a TOML basic string: quotes and backslashes escaped, \b \t \n \f \r by name, every
// other control character (and DEL) as \u00XX. Any UTF-8 input gives valid TOML.
std::string QuoteTomlString(std::string_view value);

// A key segment: bare when it is [A-Za-z0-9_-]+, else quoted.
std::string TomlKeySegment(std::string_view segment);

}  // namespace ktesio::contract
