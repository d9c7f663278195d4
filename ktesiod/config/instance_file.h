#pragma once

// The instance layer on disk: <home>/config.toml, a TOML document whose dotted unified keys are
// nested as tables ("[restart]\npolicy = \"never\"", "[agent]\nFOO = \"x\""), with typed values
// (unsigned keys as TOML integers, autostart as a boolean, everything else as strings). Hand
// edits are allowed; a quoted dotted key ("restart.policy" = ...) is read as the same unified key.
//
// Writes are atomic (temp file + fsync + rename, mode 0600) and re-render the whole document in
// canonical form (comments and layout are not preserved). Set and Unset are serialized
// process-wide, so concurrent calls never lose an update; other processes must not write the file.

#include <map>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ktesio::daemon::config::instance_file {

inline constexpr std::string_view kFileName = "config.toml";

// <home>/config.toml
std::string PathIn(const std::string& home);

// Reads the instance layer: unified key -> normalized value (a missing file is an empty layer).
// Every entry is validated as `config set` would validate it.
// Errors (messages start "<path>:<line>:<column>: " where a position exists):
//   INVALID_ARGUMENT/CONFIG_INVALID: not valid TOML, a value of the wrong TOML type, a key
//     defined twice (nested and quoted spellings), or an invalid value;
//   INVALID_ARGUMENT/UNKNOWN_CONFIG_KEY: an unknown key (with a suggestion);
//   PERMISSION_DENIED/CONFIG_INVALID: an engine-reserved key;
//   INTERNAL/IO_ERROR: the file exists but cannot be read.
absl::StatusOr<std::map<std::string, std::string>> Load(const std::string& home);

// Validates `value` for `key` (ValidateValue, operator writer) and stores its normalized form,
// which is returned. Other entries are kept as they are, even ones Load would reject, so an
// operator can repair a hand-edited file one key at a time. On any error the file is left
// byte-for-byte unchanged.
// Errors: those of ValidateValue; INVALID_ARGUMENT/CONFIG_INVALID when the existing file is not
// valid TOML or holds a value the engine cannot rewrite (float, array, date); IO_ERROR from
// reading or writing (NOT_FOUND/IO_ERROR when `home` does not exist).
absl::StatusOr<std::string> Set(const std::string& home, std::string_view key,
                                std::string_view value);

// Removes `key` from the file; returns whether an entry was removed (false leaves the file
// untouched). Accepts any known key (reserved ones too, so a hand-edit can be repaired), any
// agent.<NAME> key, and any key actually present in the file.
// Errors: INVALID_ARGUMENT/UNKNOWN_CONFIG_KEY for an unknown key not in the file; then as Set.
absl::StatusOr<bool> Unset(const std::string& home, std::string_view key);

}  // namespace ktesio::daemon::config::instance_file
