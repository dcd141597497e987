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

// Appends the part of `file` that `needed` names to `set`, after the files it imports that
// are needed too, each once.
void AddNeeded(const gp::FileDescriptor* file, const Needed& needed,
               const absl::flat_hash_set<const gp::FileDescriptor*>& files,
               absl::flat_hash_set<const gp::FileDescriptor*>& added,
               gp::FileDescriptorSet& set) {
  if (!added.insert(file).second) return;
  gp::FileDescriptorProto* proto = nullptr;
  std::vector<std::string> imports;
  for (int i = 0; i < file->dependency_count(); ++i) {
    if (!files.contains(file->dependency(i))) continue;
    AddNeeded(file->dependency(i), needed, files, added, set);
    imports.push_back(file->dependency(i)->name());
  }
  proto = set.add_file();
  proto->set_name(file->name());
  proto->set_package(file->package());
  proto->set_syntax(file->syntax() == gp::FileDescriptor::SYNTAX_PROTO3 ? "proto3" : "proto2");
  for (const std::string& name : imports) proto->add_dependency(name);
  for (int i = 0; i < file->message_type_count(); ++i) {
    if (needed.Has(file->message_type(i))) file->message_type(i)->CopyTo(proto->add_message_type());
  }
  for (int i = 0; i < file->enum_type_count(); ++i) {
    if (needed.Has(file->enum_type(i))) file->enum_type(i)->CopyTo(proto->add_enum_type());
  }
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
