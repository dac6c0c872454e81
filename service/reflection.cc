#include "service/reflection.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include <absl/strings/str_cat.h>
#include <google/protobuf/descriptor.pb.h>

#include "proto/served_descriptors.h"

namespace furrballs::service {
namespace {

namespace v1alpha = grpc::reflection::v1alpha;
using google::protobuf::FileDescriptor;

[[noreturn]] void BrokenBuild(const std::string& why) {
  std::fprintf(stderr,
               "furrballs: the reflection descriptors built into this binary "
               "are broken (%s); rebuild it\n",
               why.c_str());
  std::abort();
}

// One reflection stream: read a request, write its answer, read the next.
// Only one operation is outstanding at a time, so no lock is needed.
class ReflectionStream final
    : public grpc::ServerBidiReactor<ReflectionService::Request,
                                     ReflectionService::Response> {
 public:
  explicit ReflectionStream(const ReflectionService* service)
      : service_(service) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed (or went away)
      Finish(grpc::Status::OK);
      return;
    }
    response_ = service_->Answer(request_, &sent_);
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {  // the client went away
      Finish(grpc::Status::OK);
      return;
    }
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  const ReflectionService* const service_;
  ReflectionService::Request request_;
  ReflectionService::Response response_;
  absl::flat_hash_set<std::string> sent_;  // files sent on this stream
};

void Error(v1alpha::ServerReflectionResponse* response, grpc::StatusCode code,
           const std::string& message) {
  v1alpha::ErrorResponse* e = response->mutable_error_response();
  e->set_error_code(static_cast<int>(code));
  e->set_error_message(message);
}

}  // namespace

ReflectionService::ReflectionService(std::string_view descriptor_set) {
  google::protobuf::FileDescriptorSet set;
  if (!set.ParseFromArray(descriptor_set.data(),
                          static_cast<int>(descriptor_set.size()))) {
    BrokenBuild("not a FileDescriptorSet");
  }
  for (google::protobuf::FileDescriptorProto& file : *set.mutable_file()) {
    std::string serialized = file.SerializeAsString();
    // Answers carry the serialized files, comments included; the pool only
    // resolves names, so its copy goes without the source info, which is
    // most of a file (a few hundred KiB of heap kept for nothing).
    file.clear_source_code_info();
    if (!database_.Add(file)) BrokenBuild("duplicate file " + file.name());
    files_[file.name()] = std::move(serialized);
  }
  // Build every file now, so that a broken set fails at start-up rather than
  // on some later request.
  for (const google::protobuf::FileDescriptorProto& proto : set.file()) {
    const FileDescriptor* file = pool_.FindFileByName(proto.name());
    if (file == nullptr) BrokenBuild("file " + proto.name() + " does not build");
    for (int i = 0; i < file->service_count(); ++i) {
      services_.push_back(file->service(i)->full_name());
    }
  }
}

grpc::ServerBidiReactor<ReflectionService::Request,
                        ReflectionService::Response>*
ReflectionService::ServerReflectionInfo(grpc::CallbackServerContext*) {
  return new ReflectionStream(this);
}

void ReflectionService::AddFile(const FileDescriptor* file,
                                absl::flat_hash_set<std::string>* sent,
                                v1alpha::FileDescriptorResponse* out) const {
  // The file asked for is always sent, even if it went out before on this
  // stream, so that every answer names it; its dependencies only once.
  std::vector<const FileDescriptor*> pending = {file};
  sent->insert(file->name());
  while (!pending.empty()) {
    const FileDescriptor* f = pending.back();
    pending.pop_back();
    out->add_file_descriptor_proto(files_.at(f->name()));
    for (int i = 0; i < f->dependency_count(); ++i) {
      const FileDescriptor* dep = f->dependency(i);
      if (sent->insert(dep->name()).second) pending.push_back(dep);
    }
  }
}

ReflectionService::Response ReflectionService::Answer(
    const Request& request, absl::flat_hash_set<std::string>* sent) const {
  Response response;
  response.set_valid_host(request.host());
  *response.mutable_original_request() = request;
  switch (request.message_request_case()) {
    case Request::kFileByFilename: {
      const FileDescriptor* file =
          pool_.FindFileByName(request.file_by_filename());
      if (file == nullptr) {
        Error(&response, grpc::StatusCode::NOT_FOUND,
              absl::StrCat("no file named ", request.file_by_filename()));
        break;
      }
      AddFile(file, sent, response.mutable_file_descriptor_response());
      break;
    }
    case Request::kFileContainingSymbol: {
      const FileDescriptor* file =
          pool_.FindFileContainingSymbol(request.file_containing_symbol());
      if (file == nullptr) {
        Error(&response, grpc::StatusCode::NOT_FOUND,
              absl::StrCat("no symbol named ",
                           request.file_containing_symbol()));
        break;
      }
      AddFile(file, sent, response.mutable_file_descriptor_response());
      break;
    }
    case Request::kFileContainingExtension: {
      const v1alpha::ExtensionRequest& ext = request.file_containing_extension();
      const google::protobuf::Descriptor* type =
          pool_.FindMessageTypeByName(ext.containing_type());
      const google::protobuf::FieldDescriptor* field =
          type == nullptr
              ? nullptr
              : pool_.FindExtensionByNumber(type, ext.extension_number());
      if (field == nullptr) {
        Error(&response, grpc::StatusCode::NOT_FOUND,
              absl::StrCat("no extension ", ext.extension_number(), " of ",
                           ext.containing_type()));
        break;
      }
      AddFile(field->file(), sent, response.mutable_file_descriptor_response());
      break;
    }
    case Request::kAllExtensionNumbersOfType: {
      const google::protobuf::Descriptor* type =
          pool_.FindMessageTypeByName(request.all_extension_numbers_of_type());
      if (type == nullptr) {
        Error(&response, grpc::StatusCode::NOT_FOUND,
              absl::StrCat("no message type named ",
                           request.all_extension_numbers_of_type()));
        break;
      }
      std::vector<const google::protobuf::FieldDescriptor*> extensions;
      pool_.FindAllExtensions(type, &extensions);
      v1alpha::ExtensionNumberResponse* numbers =
          response.mutable_all_extension_numbers_response();
      numbers->set_base_type_name(type->full_name());
      for (const auto* e : extensions) numbers->add_extension_number(e->number());
      break;
    }
    case Request::kListServices:
      for (const std::string& name : services_) {
        response.mutable_list_services_response()->add_service()->set_name(
            name);
      }
      break;
    case Request::MESSAGE_REQUEST_NOT_SET:
      Error(&response, grpc::StatusCode::INVALID_ARGUMENT,
            "the request asks for nothing (message_request is not set)");
      break;
  }
  return response;
}

ReflectionService* ServedReflection() {
  static ReflectionService* const service =
      new ReflectionService(proto::ServedDescriptorSet());
  return service;
}

}  // namespace furrballs::service
