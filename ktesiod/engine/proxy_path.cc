#include "engine/proxy_path.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

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
  if (RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), static_cast<int>(key.size())) != 1) {
    return contract::MakeError(absl::StatusCode::kInternal, contract::reason::kInternal,
                               "no random bytes for the metering proxy key");
  }
  KT_RETURN_IF_ERROR(fs::WriteFileAtomic(path, key, 0600));
  return ProxyKey{std::move(key), true};
}

std::string ProxyPathPrefix(const std::string& key, const std::string& name,
                            int64_t registered_at_ms) {
  const std::string message = absl::StrCat(name, std::string(1, '\0'), registered_at_ms);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &length);
  constexpr char kHex[] = "0123456789abcdef";
  std::string prefix = "/kt-";
  for (unsigned int i = 0; i < 16 && i < length; ++i) {
    prefix.push_back(kHex[digest[i] >> 4]);
    prefix.push_back(kHex[digest[i] & 0xf]);
  }
  return prefix;
}

}  // namespace ktesio::daemon::engine
