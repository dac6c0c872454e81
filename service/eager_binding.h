// service/eager_binding.h: the server binds its shared libraries' symbols
// at start-up, not on first use (issue 13, goal 3: RSS after a fill).
//
// Thread safety: call once, first thing in main, before any other thread
// exists (it may replace the process image).
//
// Why. The server drops the pages of its read-only file mappings once it
// has started (startup_pages.h): what serving touches afterwards comes back
// with 64 KiB of neighbours per fault. The executable is linked `-z now`,
// but libstdc++.so is not, so each libstdc++ function serving reaches
// through its PLT for the first time after start-up makes ld.so look the
// symbol up then: glibc's, libstdc++'s and libm's symbol tables and hash
// sections and ld.so's resolver come back into the RSS, 0.6-0.8 MiB after
// a 1 KiB fill (docs/memory_bench.md, "Libraries bound at start-up").
// glibc binds every object of a process eagerly only when LD_BIND_NOW is
// set in its environment at exec (a loaded library cannot be rebound:
// dlopen(RTLD_NOW | RTLD_NOLOAD) leaves its lazy PLT entries as they are),
// so the server, when LD_BIND_NOW is not in its environment, sets it and
// executes itself again (/proc/self/exe, the same arguments): same pid,
// one more exec at start-up, a few milliseconds.
//
// An LD_BIND_NOW already in the environment, whatever its value (glibc
// binds lazily when it is empty), is left as the user set it. If the exec
// fails (no /proc), the server goes on with lazy binding and says so.
#ifndef FURRBALLS_SERVICE_EAGER_BINDING_H_
#define FURRBALLS_SERVICE_EAGER_BINDING_H_

namespace furrballs::service {

// Returns only if the process already binds eagerly, the user chose, or the
// exec failed (then with a note on stderr); else it does not return.
void ReexecWithEagerBinding(char** argv);

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_EAGER_BINDING_H_
