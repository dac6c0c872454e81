#!/usr/bin/env python3
"""Checks furrballs.v1 against its recorded wire contract (proto/README.md).

The contract, api_v1.json beside this script, lists every message field
(number -> name, type, label), every enum value and every RPC (request,
response, streaming). The current .proto may add to it, never change or
remove what it lists, except a field whose number the .proto now reserves.

usage: api_compat.py PROTOC PROTO_FILE CONTRACT [--update]
"""
import json
import os
import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2


def describe(protoc, proto_file):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "set.pb")
        include = os.path.dirname(os.path.dirname(os.path.dirname(proto_file)))
        subprocess.run([protoc, "-I", include, "--descriptor_set_out=" + out,
                        os.path.relpath(proto_file, include)], check=True)
        fds = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            fds.ParseFromString(f.read())
    (fd,) = fds.file
    api = {"messages": {}, "reserved": {}, "enums": {}, "rpcs": {}}

    def walk(prefix, messages, enums):
        for e in enums:
            api["enums"][prefix + e.name] = {
                str(v.number): v.name for v in e.value}
        for m in messages:
            name = prefix + m.name
            api["messages"][name] = {
                str(f.number): [f.name, f.type_name or str(f.type),
                                str(f.label), f.oneof_index if
                                f.HasField("oneof_index") else -1]
                for f in m.field}
            api["reserved"][name] = [[r.start, r.end] for r in m.reserved_range]
            walk(name + ".", m.nested_type, m.enum_type)

    walk(fd.package + ".", fd.message_type, fd.enum_type)
    for s in fd.service:
        for m in s.method:
            api["rpcs"][f"{s.name}.{m.name}"] = [
                m.input_type, m.output_type, m.client_streaming,
                m.server_streaming]
    return api


def reserved(api, message, number):
    return any(lo <= number < hi for lo, hi in api["reserved"].get(message, []))


def compare(old, new):
    problems = []
    for msg, fields in old["messages"].items():
        if msg not in new["messages"]:
            problems.append(f"message {msg} was removed")
            continue
        for number, spec in fields.items():
            now = new["messages"][msg].get(number)
            if now is None:
                if not reserved(new, msg, int(number)):
                    problems.append(
                        f"{msg} field {number} ({spec[0]}) was removed without "
                        f"reserving its number")
            elif now[1:3] != spec[1:3]:
                problems.append(
                    f"{msg} field {number} ({spec[0]}) changed type or label: "
                    f"{spec[1:3]} -> {now[1:3]}")
            elif now[0] != spec[0]:
                problems.append(
                    f"{msg} field {number} was renamed {spec[0]} -> {now[0]} "
                    f"(breaks JSON and grpcurl clients)")
            elif (now[3] == -1) != (spec[3] == -1):
                problems.append(
                    f"{msg} field {number} ({spec[0]}) moved into or out of "
                    f"a oneof")
    for enum, values in old["enums"].items():
        for number, name in values.items():
            if new["enums"].get(enum, {}).get(number) != name:
                problems.append(f"enum {enum} value {number} ({name}) was "
                                f"removed or renamed")
    for rpc, spec in old["rpcs"].items():
        if new["rpcs"].get(rpc) != spec:
            problems.append(f"rpc {rpc} was removed or changed its signature")
    return problems


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    protoc, proto_file, contract = argv[1:4]
    new = describe(protoc, proto_file)
    if "--update" in argv:
        with open(contract, "w") as f:
            json.dump(new, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"api_compat: wrote {contract}")
        return 0
    with open(contract) as f:
        old = json.load(f)
    problems = compare(old, new)
    for p in problems:
        print("api_compat: BREAKING: " + p)
    added = sum(len(v) for v in new["messages"].values()) - sum(
        len(v) for v in old["messages"].values())
    if problems:
        print(f"api_compat: {len(problems)} breaking change(s); see "
              f"proto/README.md")
        return 1
    print(f"api_compat: compatible ({added:+d} fields against the contract)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
