#include "json.h"

#include <cstdlib>

#include "ktesio/contract/json.h"

namespace ktesio::testing {
namespace {

// The tree of the project's one JSON reader (ktesio/contract/json.h), in the tests' shape.
Json Convert(const contract::json::Value& value) {
  using Kind = contract::json::Kind;
  Json out;
  switch (value.kind) {
    case Kind::kNull:
      break;
    case Kind::kBool:
      out.type = Json::Type::kBool;
      out.boolean = value.boolean;
      break;
    case Kind::kNumber:
      out.type = Json::Type::kNumber;
      out.number = value.text;
      break;
    case Kind::kString:
      out.type = Json::Type::kString;
      out.string = value.text;
      break;
    case Kind::kArray:
      out.type = Json::Type::kArray;
      for (const contract::json::Value& item : value.items) {
        out.array.push_back(Convert(item));
      }
      break;
    case Kind::kObject:
      out.type = Json::Type::kObject;
      for (const contract::json::Member& member : value.members) {
        out.object.emplace_back(member.key, Convert(member.value));
      }
      break;
  }
  return out;
}

}  // namespace

const Json* Json::Find(const std::string& key) const {
  for (const auto& [k, v] : object) {
    if (k == key) {
      return &v;
    }
  }
  return nullptr;
}

const Json& Json::operator[](const std::string& key) const {
  static const Json kNull;
  const Json* found = Find(key);
  return found == nullptr ? kNull : *found;
}

std::vector<std::string> Json::Keys() const {
  std::vector<std::string> keys;
  for (const auto& [k, v] : object) {
    keys.push_back(k);
  }
  return keys;
}

bool Json::IsInteger() const {
  return type == Type::kNumber && number.find_first_of(".eE") == std::string::npos;
}

long long Json::Int() const { return std::atoll(number.c_str()); }

std::optional<Json> ParseJson(const std::string& text) {
  std::optional<contract::json::Value> value = contract::json::Parse(text);
  if (!value.has_value()) {
    return std::nullopt;
  }
  return Convert(*value);
}

}  // namespace ktesio::testing
