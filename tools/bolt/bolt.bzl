"""bolt_binary: a linked executable with its functions laid out by BOLT.

The input is a cc_binary linked with -Wl,--emit-relocs (BOLT needs the
relocations to move functions); the output is the same program with the
functions named in `function_order` first, in that order, in a .text of
their own, and every other function after them in .text.cold. Its data
stays where the linker put it. BOLT also runs its default rewriting passes
on the code it moves (shorter instruction encodings, empty blocks removed,
conditional tail calls simplified, jump tables moved), and it drops the
DWARF debug sections: llvm-bolt-15's -update-debug-sections writes wrong
file names into DWARF 5 line tables (gcc 12's and clang 14's default) or
crashes on them, so the laid-out binary has symbols (stack traces name
functions) but no line tables. Do not run GNU strip or objcopy on it: they
re-lay its segments and the result does not load.

The action fails when more than a tenth of the function list names
functions the binary no longer has (a stale list: regenerate it with
bench/memory/serving_order.py); a few missing names (a function inlined
away by another compiler) are only logged.

Why: the kernel maps a file's pages around every page fault (fault-around,
64 KiB), so the code a long-running process keeps touching costs it the
64 KiB blocks that code is spread over. With what it runs packed together,
those blocks hold little else (docs/memory_bench.md, "The server's code,
laid out by function").

In the optimized build without --config=fuzz only (if_laid_out); in every
other configuration the output is the linked binary as it is (sanitizer
runtimes and coverage instrumentation are not what the order file was made
from, and nothing there measures RSS).
"""

def if_laid_out(yes, no):
    """`yes` in the configurations where bolt_binary lays the binary out,
    `no` in the others (for a test's expectations, say)."""
    return select({
        "//tools/bolt:opt_fuzzing": no,
        "//tools/bolt:opt": yes,
        "//conditions:default": no,
    })

def _bolt_binary_impl(ctx):
    linked = ctx.executable.binary
    out = ctx.actions.declare_file(ctx.label.name)
    if ctx.attr.laid_out:
        log = ctx.actions.declare_file(ctx.label.name + ".bolt.log")
        ctx.actions.run_shell(
            inputs = [linked, ctx.file.function_order],
            outputs = [out, log],
            # BOLT prints a warning for every function it cannot rewrite
            # (hand-written assembly of OpenSSL, ...): kept in the log,
            # shown only if it fails.
            command = ('llvm-bolt-15 "$1" -o "$2" -reorder-functions=user ' +
                       '-function-order="$3" -lite=0 ' +
                       '>"$4" 2>&1 || { cat "$4" >&2; exit 1; }; ' +
                       'listed=$(grep -c . "$3"); ' +
                       'missing=$(grep -c "can.t find function for" "$4" || true); ' +
                       'if [ $((missing * 10)) -gt "$listed" ]; then ' +
                       'echo "bolt_binary: $missing of the $listed functions in $3 are not in ' +
                       'the binary: the list is stale; regenerate it with ' +
                       'bench/memory/serving_order.py (docs/build.md)" >&2; ' +
                       'rm -f "$2"; exit 1; fi'),
            arguments = [linked.path, out.path, ctx.file.function_order.path, log.path],
            use_default_shell_env = True,
            mnemonic = "BoltLayout",
            progress_message = "Laying out the functions of %s (llvm-bolt-15)" % linked.short_path,
        )
        logs = [log]
    else:
        ctx.actions.symlink(output = out, target_file = linked, is_executable = True)
        logs = []
    return [
        DefaultInfo(
            executable = out,
            files = depset([out]),
            runfiles = ctx.runfiles(files = [out]),
        ),
        OutputGroupInfo(bolt_log = depset(logs)),
    ]

_bolt_binary = rule(
    implementation = _bolt_binary_impl,
    executable = True,
    attrs = {
        "binary": attr.label(
            executable = True,
            cfg = "target",
            mandatory = True,
            doc = "the cc_binary, linked with -Wl,--emit-relocs",
        ),
        "function_order": attr.label(
            allow_single_file = True,
            mandatory = True,
            doc = "mangled function names, one per line, in the order to lay them out",
        ),
        # Set by the macro below from the configuration.
        "laid_out": attr.bool(default = False),
    },
    doc = "The binary with its functions laid out by BOLT (see the file's docstring).",
)

def bolt_binary(name, binary, function_order, **kwargs):
    _bolt_binary(
        name = name,
        binary = binary,
        function_order = function_order,
        laid_out = if_laid_out(True, False),
        **kwargs
    )
