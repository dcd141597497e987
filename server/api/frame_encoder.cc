#include "server/api/frame_encoder.h"

#include <vector>

#include "absl/container/flat_hash_set.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
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

namespace {

// Appends `file` to `set` after the files it imports, each once.
void AddWithImports(const google::protobuf::FileDescriptor* file,
                    absl::flat_hash_set<const google::protobuf::FileDescriptor*>& added,
                    google::protobuf::FileDescriptorSet& set) {
  if (!added.insert(file).second) return;
  for (int i = 0; i < file->dependency_count(); ++i) AddWithImports(file->dependency(i), added, set);
  file->CopyTo(set.add_file());
}

}  // namespace

std::string WorldStateDescriptorSet() {
  google::protobuf::FileDescriptorSet set;
  absl::flat_hash_set<const google::protobuf::FileDescriptor*> added;
  AddWithImports(::pitlane::v1::WorldState::descriptor()->file(), added, set);
  return set.SerializeAsString();
}

}  // namespace pitlane::api
