// The protobuf encoding of a session's frames, made once per frame however many streams send
// it (a frame's encodings belong to the layer that makes them, not to the frame).
#ifndef PITLANE_SERVER_API_FRAME_ENCODER_H_
#define PITLANE_SERVER_API_FRAME_ENCODER_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/descriptor.h"
#include "pitlane/v1/simulator.pb.h"
#include "server/session/frame.h"

namespace pitlane::api {

// Thread-safe. Keeps the encoding of the newest frame asked for: the streams of a session
// take the newest frame, so they all hit it. The first to ask encodes, on its own thread,
// while the others wait for it (at most one encoding per frame).
class FrameEncoder {
 public:
  // The frame's WorldState, serialized.
  std::shared_ptr<const std::string> Encode(const std::shared_ptr<const session::Frame>& frame);

 private:
  absl::Mutex mu_;
  // The frame encoded last (compared by identity while it is alive) and its bytes.
  std::weak_ptr<const session::Frame> frame_ ABSL_GUARDED_BY(mu_);
  const session::Frame* frame_address_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::shared_ptr<const std::string> bytes_ ABSL_GUARDED_BY(mu_);
  // Filled for every frame and cleared, never freed: its vehicles' messages are reused.
  ::pitlane::v1::WorldState scratch_ ABSL_GUARDED_BY(mu_);
};

// The serialized google.protobuf.FileDescriptorSet that a reader needs to decode `message`:
// its file and the files it imports, imports first, each with only the top-level messages and
// enums that `message` uses, transitively (Foxglove's protobuf channels and recordings carry
// it as their schema).
std::string DescriptorSetFor(const google::protobuf::Descriptor* message);
// DescriptorSetFor(pitlane.v1.WorldState).
std::string WorldStateDescriptorSet();

}  // namespace pitlane::api

#endif  // PITLANE_SERVER_API_FRAME_ENCODER_H_
