#include "ktesio/contract/error.h"

#include "absl/strings/cord.h"

namespace ktesio::contract {

absl::Status MakeError(absl::StatusCode code, std::string_view reason, std::string_view message) {
  absl::Status status(code, absl::string_view(message.data(), message.size()));
  status.SetPayload(absl::string_view(kReasonPayloadUrl.data(), kReasonPayloadUrl.size()),
                    absl::Cord(absl::string_view(reason.data(), reason.size())));
  return status;
}

std::string ErrorReason(const absl::Status& status) {
  auto payload =
      status.GetPayload(absl::string_view(kReasonPayloadUrl.data(), kReasonPayloadUrl.size()));
  if (!payload.has_value()) {
    return "";
  }
  return std::string(*payload);
}

}  // namespace ktesio::contract
