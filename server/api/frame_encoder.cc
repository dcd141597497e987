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

namespace gp = ::google::protobuf;

// The top-level types a message's fields need, transitively (a nested type counts as the
// top-level type that holds it, which is kept whole).
class Needed {
 public:
  void Message(const gp::Descriptor* message) {
    while (message->containing_type() != nullptr) message = message->containing_type();
    if (!messages_.insert(message).second) return;
    Fields(message);
  }
  bool Has(const gp::Descriptor* message) const { return messages_.contains(message); }
  bool Has(const gp::EnumDescriptor* type) const { return enums_.contains(type); }
  absl::flat_hash_set<const gp::FileDescriptor*> Files() const {
    absl::flat_hash_set<const gp::FileDescriptor*> files;
    for (const gp::Descriptor* message : messages_) files.insert(message->file());
    for (const gp::EnumDescriptor* type : enums_) files.insert(type->file());
    return files;
  }

 private:
  void Fields(const gp::Descriptor* message) {
    for (int i = 0; i < message->field_count(); ++i) {
      const gp::FieldDescriptor* field = message->field(i);
      if (field->message_type() != nullptr) Message(field->message_type());
      if (field->enum_type() != nullptr) Enum(field->enum_type());
    }
    for (int i = 0; i < message->nested_type_count(); ++i) Fields(message->nested_type(i));
  }
  void Enum(const gp::EnumDescriptor* type) {
    if (type->containing_type() != nullptr) {
      Message(type->containing_type());
    } else {
      enums_.insert(type);
    }
  }

  absl::flat_hash_set<const gp::Descriptor*> messages_;
  absl::flat_hash_set<const gp::EnumDescriptor*> enums_;
};

// Whether `file` holds a needed type or imports, publicly or not, one that does.
bool Reaches(const gp::FileDescriptor* file,
             const absl::flat_hash_set<const gp::FileDescriptor*>& files) {
  if (files.contains(file)) return true;
  for (int i = 0; i < file->dependency_count(); ++i) {
    if (Reaches(file->dependency(i), files)) return true;
  }
  return false;
}

// Appends `file` to `set` with only the top-level messages and enums `needed` names (its
// options, syntax and the rest as they are), after the files it imports that hold any of them
// (each once; public imports followed through files that hold none).
void AddNeeded(const gp::FileDescriptor* file, const Needed& needed,
               const absl::flat_hash_set<const gp::FileDescriptor*>& files,
               absl::flat_hash_set<const gp::FileDescriptor*>& added,
               gp::FileDescriptorSet& set) {
  if (!added.insert(file).second) return;
  gp::FileDescriptorProto proto;
  file->CopyTo(&proto);
  proto.clear_dependency();
  proto.clear_public_dependency();
  proto.clear_weak_dependency();
  for (int i = 0; i < file->dependency_count(); ++i) {
    if (!Reaches(file->dependency(i), files)) continue;
    AddNeeded(file->dependency(i), needed, files, added, set);
    proto.add_dependency(file->dependency(i)->name());
  }
  proto.clear_message_type();
  for (int i = 0; i < file->message_type_count(); ++i) {
    if (needed.Has(file->message_type(i))) file->message_type(i)->CopyTo(proto.add_message_type());
  }
  proto.clear_enum_type();
  for (int i = 0; i < file->enum_type_count(); ++i) {
    if (needed.Has(file->enum_type(i))) file->enum_type(i)->CopyTo(proto.add_enum_type());
  }
  // What could name types left out: services and extensions.
  proto.clear_service();
  proto.clear_extension();
  *set.add_file() = std::move(proto);
}

}  // namespace

std::string DescriptorSetFor(const gp::Descriptor* message) {
  Needed needed;
  needed.Message(message);
  const absl::flat_hash_set<const gp::FileDescriptor*> files = needed.Files();
  gp::FileDescriptorSet set;
  absl::flat_hash_set<const gp::FileDescriptor*> added;
  // Every needed file is reached from the message's own, through its imports.
  AddNeeded(message->file(), needed, files, added, set);
  return set.SerializeAsString();
}

std::string WorldStateDescriptorSet() {
  return DescriptorSetFor(::pitlane::v1::WorldState::descriptor());
}

}  // namespace pitlane::api
