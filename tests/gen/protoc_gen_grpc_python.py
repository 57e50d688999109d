"""A protoc plugin that runs grpcio-tools' gRPC Python generator, for `buf generate`.

grpcio-tools compiles the gRPC Python generator into its embedded protoc instead of shipping
a `protoc-gen-grpc_python` executable, and buf can only run protoc built-ins it knows by name
(python, pyi, ...), not this one. This plugin bridges the two: it reads buf's
CodeGeneratorRequest from stdin, hands the files to `grpc_tools.protoc --grpc_python_out`
through a descriptor set (so no .proto search path is needed), and answers with the files it
wrote as a CodeGeneratorResponse.
"""

import os
import sys
import tempfile

from google.protobuf import descriptor_pb2
from google.protobuf.compiler import plugin_pb2
from grpc_tools import protoc


def main() -> int:
    request = plugin_pb2.CodeGeneratorRequest.FromString(sys.stdin.buffer.read())
    response = plugin_pb2.CodeGeneratorResponse()
    response.supported_features = plugin_pb2.CodeGeneratorResponse.FEATURE_PROTO3_OPTIONAL
    with tempfile.TemporaryDirectory() as tmp:
        fds = descriptor_pb2.FileDescriptorSet(file=request.proto_file)
        fds_path = os.path.join(tmp, "input.binpb")
        with open(fds_path, "wb") as f:
            f.write(fds.SerializeToString())
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        args = ["grpc_tools.protoc", f"--descriptor_set_in={fds_path}"]
        opt = f"{request.parameter}:" if request.parameter else ""
        args.append(f"--grpc_python_out={opt}{out}")
        args.extend(request.file_to_generate)
        code = protoc.main(args)
        if code != 0:
            response.error = f"grpc_tools.protoc exited {code}"
        else:
            for dirpath, _, names in os.walk(out):
                for name in sorted(names):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8") as f:
                        response.file.add(name=os.path.relpath(path, out), content=f.read())
    sys.stdout.buffer.write(response.SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main())
