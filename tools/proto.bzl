"""Protobuf and gRPC C++ code generation with the system protoc.

Debian's Bazel 4.2.3 has no usable proto rules offline, so generation is a
genrule around /usr/bin/protoc and grpc_cpp_plugin, wrapped in a cc_library.
Sources are named relative to the calling package, which is also the import
root: in package //proto, "furrballs/v1/x.proto" is imported as
"furrballs/v1/x.proto" and its header included as "furrballs/v1/x.pb.h".
"""

def cc_grpc_proto_library(name, srcs, deps = [], grpc = True, visibility = None):
    """Generates C++ (and, with grpc = True, gRPC service) code for srcs.

    Args:
      name: the cc_library to create.
      srcs: .proto files relative to this package.
      deps: other cc_grpc_proto_library targets whose protos srcs import.
      grpc: also run grpc_cpp_plugin.
      visibility: visibility of the cc_library.
    """
    pkg = native.package_name()
    gen_dir = "$(GENDIR)/" + pkg if pkg else "$(GENDIR)"
    proto_root = pkg if pkg else "."
    bases = [src[:-len(".proto")] for src in srcs]
    hdrs = [b + ".pb.h" for b in bases]
    cc_srcs = [b + ".pb.cc" for b in bases]
    if grpc:
        hdrs += [b + ".grpc.pb.h" for b in bases]
        cc_srcs += [b + ".grpc.pb.cc" for b in bases]

    grpc_flags = ""
    if grpc:
        grpc_flags = (" --plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin)" +
                      " --grpc_out=" + gen_dir)

    native.genrule(
        name = name + "_codegen",
        srcs = srcs,
        outs = hdrs + cc_srcs,
        cmd = ("protoc --proto_path=" + proto_root +
               " --cpp_out=" + gen_dir + grpc_flags +
               " " + " ".join(["$(location %s)" % s for s in srcs])),
    )

    native.cc_library(
        name = name,
        srcs = cc_srcs,
        hdrs = hdrs,
        includes = ["."],
        deps = deps + (["//third_party:grpc"] if grpc else ["//third_party:protobuf"]),
        visibility = visibility,
    )
