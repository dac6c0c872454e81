"""cc_fuzz_target: a libFuzzer target and the test that replays its corpus.

See docs/fuzzing.md. For a target NAME in package PKG, with its checked-in
corpus in PKG/corpus/NAME/ (seeds and every input that once found a bug):

  NAME              cc_binary, tagged "fuzz_target" and "manual" (not part
                    of //...). Built with --config=fuzz it is a libFuzzer
                    binary (clang, ASAN + UBSAN, coverage); tools/fuzz.sh
                    builds and runs it. In any other configuration it replays
                    the files and directories given as arguments.
  NAME_corpus_test  cc_test that replays PKG/corpus/NAME/ in whatever
                    configuration the tests run in (gcc, and the tsan, asan
                    and ubsan phases of tools/test.sh for engine packages),
                    so a fixed bug stays fixed everywhere.

The source defines LLVMFuzzerTestOneInput and, if it needs set-up,
LLVMFuzzerInitialize, as libFuzzer expects.
"""

def cc_fuzz_target(name, srcs, deps = [], size = "small", **kwargs):
    native.cc_binary(
        name = name,
        testonly = True,
        srcs = srcs,
        deps = deps + select({
            "//tools/fuzz:fuzzing": [],
            "//conditions:default": ["//tools/fuzz:replay_main"],
        }),
        linkopts = select({
            "//tools/fuzz:fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        tags = ["manual", "fuzz_target"],
        **kwargs
    )
    corpus = "corpus/%s" % name
    native.cc_test(
        name = name + "_corpus_test",
        size = size,
        srcs = srcs,
        deps = deps + ["//tools/fuzz:replay_main"],
        data = native.glob([corpus + "/*"]),
        args = ["%s/%s" % (native.package_name(), corpus)],
        **kwargs
    )
