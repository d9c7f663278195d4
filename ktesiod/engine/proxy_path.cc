#include "engine/proxy_path.h"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string_view>

// The low-level SHA-256 interface computes the digest in place. OpenSSL 3 keeps it as deprecated
// in favour of EVP, whose first use initialises the library (reads openssl.cnf, loads the
// providers, seeds a DRBG): about 2 MiB of the daemon's resident memory, for one HMAC per
// instance name. The one-shot functions below use no other OpenSSL state.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include "absl/strings/str_cat.h"
#include "fs/fs.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::daemon::engine {

constexpr size_t kKeyBytes = 32;

absl::StatusOr<ProxyKey> LoadProxyKey(const std::string& state_dir) {
  const std::string path = state_dir + "/proxy.key";
  absl::StatusOr<std::string> existing = fs::ReadFile(path);
  if (existing.ok()) {
    if (existing->size() != kKeyBytes) {
      return contract::MakeError(
          absl::StatusCode::kFailedPrecondition, contract::reason::kIoError,
          absl::StrCat(path, " holds ", existing->size(), " bytes, not ", kKeyBytes,
                       ": remove it to have a new key made (agents running now then need a "
                       "restart to reach their metering proxy)"));
    }
    return ProxyKey{std::move(*existing), false};
  }
  if (existing.status().code() != absl::StatusCode::kNotFound) {
    return existing.status();
  }
  std::string key(kKeyBytes, '\0');
  // The kernel's CSPRNG (blocks only before the pool is first seeded, early at boot).
  ssize_t got = -1;
  do {
    got = getrandom(key.data(), key.size(), 0);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(key.size())) {
    return contract::MakeError(absl::StatusCode::kInternal, contract::reason::kInternal,
                               absl::StrCat("no random bytes for the metering proxy key: ",
                                            got < 0 ? std::strerror(errno) : "short read"));
  }
  KT_RETURN_IF_ERROR(fs::WriteFileAtomic(path, key, 0600));
  return ProxyKey{std::move(key), true};
}

namespace {

// HMAC-SHA256 (RFC 2104) over the low-level SHA-256 functions.
std::array<unsigned char, SHA256_DIGEST_LENGTH> HmacSha256(std::string_view key,
                                                           std::string_view message) {
  constexpr std::size_t kBlock = SHA256_CBLOCK;
  std::array<unsigned char, kBlock> padded{};
  if (key.size() > kBlock) {
    SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), padded.data());
  } else {
    std::memcpy(padded.data(), key.data(), key.size());
  }
  std::array<unsigned char, kBlock> inner_pad{};
  std::array<unsigned char, kBlock> outer_pad{};
  for (std::size_t i = 0; i < kBlock; ++i) {
    inner_pad[i] = padded[i] ^ 0x36;
    outer_pad[i] = padded[i] ^ 0x5c;
  }
  std::array<unsigned char, SHA256_DIGEST_LENGTH> inner{};
  SHA256_CTX context;
  SHA256_Init(&context);
  SHA256_Update(&context, inner_pad.data(), inner_pad.size());
  SHA256_Update(&context, message.data(), message.size());
  SHA256_Final(inner.data(), &context);
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  SHA256_Init(&context);
  SHA256_Update(&context, outer_pad.data(), outer_pad.size());
  SHA256_Update(&context, inner.data(), inner.size());
  SHA256_Final(digest.data(), &context);
  return digest;
}

}  // namespace

std::string ProxyPathPrefix(const std::string& key, const std::string& name,
                            int64_t registered_at_ms) {
  const std::string message = absl::StrCat(name, std::string(1, '\0'), registered_at_ms);
  const std::array<unsigned char, SHA256_DIGEST_LENGTH> digest = HmacSha256(key, message);
  constexpr char kHex[] = "0123456789abcdef";
  std::string prefix = "/kt-";
  for (std::size_t i = 0; i < 16; ++i) {
    prefix.push_back(kHex[digest[i] >> 4]);
    prefix.push_back(kHex[digest[i] & 0xf]);
  }
  return prefix;
}

}  // namespace ktesio::daemon::engine
