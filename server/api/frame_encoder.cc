#include "server/api/frame_encoder.h"

#include "server/api/convert.h"

namespace pitlane::api {

std::shared_ptr<const std::string> FrameEncoder::Encode(
    const std::shared_ptr<const session::Frame>& frame) {
  absl::MutexLock lock(&mu_);
  // While frame_ is alive no other frame can have its address.
  if (frame_address_ == frame.get() && !frame_.expired()) return bytes_;
  scratch_.Clear();
  FrameToProto(*frame, &scratch_);
  bytes_ = std::make_shared<const std::string>(scratch_.SerializeAsString());
  frame_ = frame;
  frame_address_ = frame.get();
  return bytes_;
}

}  // namespace pitlane::api
