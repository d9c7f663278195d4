#pragma once

// Fleet files (docs/fleet-file.md): the declarative description of a host's Agent Instances.
// This is the syntactic half, shared by every client: TOML, known keys, value types, label
// syntax, exactly one adapter source. What needs the daemon (config keys and values, secret
// references, manifests, limits) is checked by FleetService.Apply before anything changes.
// Pure: no I/O.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ktesio/contract/labels.h"

namespace ktesio::contract {

struct FleetAgentSpec {
  std::string name;
  bool name_valid = true;  // false: reported as a problem already (the daemon need not judge it)
  uint32_t line = 0;       // the [agents.NAME] table
  std::string manifest;    // as written: a dir or file, relative to the fleet file
  uint32_t manifest_line = 0;
  std::string kind;   // a builtin instead of a manifest
  std::string state;  // "" (leave alone) | "running" | "stopped"
  Labels labels;
  struct Setting {
    std::string key;    // flattened unified key
    std::string value;  // TOML strings as written; integers, floats and booleans as text
    uint32_t line = 0;
  };
  std::vector<Setting> config;
};

struct FleetFileSpec {
  std::string path;  // as given, for messages
  std::string name;  // [fleet] name
  uint32_t name_line = 0;
  std::vector<FleetAgentSpec> agents;  // in file order
};

struct FleetFileParse {
  FleetFileSpec spec;
  // Every problem found, each "PATH:LINE: message"; empty when the file is usable.
  std::vector<std::string> problems;
};

// Parses one fleet file. Reports every problem it can find, not only the first.
FleetFileParse ParseFleetFile(std::string_view text, std::string_view path);

}  // namespace ktesio::contract
