// The single translation unit that instantiates toml++ (see toml.h).
#define TOML_IMPLEMENTATION
#include "toml.h"
