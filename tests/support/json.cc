#include "json.h"

#include <cctype>
#include <cstdlib>

namespace ktesio::testing {
namespace {

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  std::optional<Json> Document() {
    std::optional<Json> value = Value();
    Skip();
    if (!value || i_ != s_.size()) {
      return std::nullopt;
    }
    return value;
  }

 private:
  void Skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) {
      ++i_;
    }
  }
  bool Eat(char c) {
    Skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  std::optional<std::string> String() {
    if (!Eat('"')) {
      return std::nullopt;
    }
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size()) {
          return std::nullopt;
        }
        char e = s_[i_++];
        switch (e) {
          case 'n':
            out += '\n';
            break;
          case 't':
            out += '\t';
            break;
          case 'r':
            out += '\r';
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'u': {
            if (i_ + 4 > s_.size()) {
              return std::nullopt;
            }
            unsigned long cp = std::strtoul(s_.substr(i_, 4).c_str(), nullptr, 16);
            i_ += 4;
            if (cp < 0x80) {
              out += static_cast<char>(cp);
            } else if (cp < 0x800) {
              out += static_cast<char>(0xc0 | (cp >> 6));
              out += static_cast<char>(0x80 | (cp & 0x3f));
            } else {
              out += static_cast<char>(0xe0 | (cp >> 12));
              out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
              out += static_cast<char>(0x80 | (cp & 0x3f));
            }
            break;
          }
          default:
            out += e;
        }
      } else {
        out += c;
      }
    }
    if (i_ >= s_.size()) {
      return std::nullopt;
    }
    ++i_;
    return out;
  }
  std::optional<Json> Value() {
    Skip();
    if (i_ >= s_.size()) {
      return std::nullopt;
    }
    Json v;
    char c = s_[i_];
    if (c == '{') {
      ++i_;
      v.type = Json::Type::kObject;
      if (Eat('}')) {
        return v;
      }
      do {
        std::optional<std::string> key = String();
        if (!key || !Eat(':')) {
          return std::nullopt;
        }
        std::optional<Json> item = Value();
        if (!item) {
          return std::nullopt;
        }
        v.object.emplace_back(*key, std::move(*item));
      } while (Eat(','));
      return Eat('}') ? std::optional<Json>(v) : std::nullopt;
    }
    if (c == '[') {
      ++i_;
      v.type = Json::Type::kArray;
      if (Eat(']')) {
        return v;
      }
      do {
        std::optional<Json> item = Value();
        if (!item) {
          return std::nullopt;
        }
        v.array.push_back(std::move(*item));
      } while (Eat(','));
      return Eat(']') ? std::optional<Json>(v) : std::nullopt;
    }
    if (c == '"') {
      std::optional<std::string> text = String();
      if (!text) {
        return std::nullopt;
      }
      v.type = Json::Type::kString;
      v.string = *text;
      return v;
    }
    for (const char* word : {"true", "false", "null"}) {
      std::string w(word);
      if (s_.compare(i_, w.size(), w) == 0) {
        i_ += w.size();
        v.type = w == "null" ? Json::Type::kNull : Json::Type::kBool;
        v.boolean = w == "true";
        return v;
      }
    }
    size_t start = i_;
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' ||
                              s_[i_] == '+' || s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
    }
    if (start == i_) {
      return std::nullopt;
    }
    v.type = Json::Type::kNumber;
    v.number = s_.substr(start, i_ - start);
    return v;
  }

  const std::string& s_;
  size_t i_ = 0;
};

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

std::optional<Json> ParseJson(const std::string& text) { return Parser(text).Document(); }

}  // namespace ktesio::testing
