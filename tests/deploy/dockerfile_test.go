package deploy

// No container engine runs here, so the image recipe is checked by reading
// it: the build stage must be the project's own set-up and build (so the
// image holds the binary CI tested, built the same way), and the runtime
// stage must agree with the manifests (user, ports, data directory, entry
// point). deploy/image_runtime.sh, the one step of ours, runs for real on
// the built server.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Instruction is one Dockerfile instruction with its continuation lines
// joined.
type Instruction struct {
	Line int
	Op   string // upper case: FROM, RUN, COPY, ...
	Args string
}

// Stage is one FROM and what follows it.
type Stage struct {
	From, Name   string
	Instructions []Instruction
}

// ParseDockerfile splits a Dockerfile into stages. It understands what
// deploy/Dockerfile uses: comments, parser directives, backslash
// continuations, "FROM image AS name".
func ParseDockerfile(text string) []Stage {
	var stages []Stage
	var pending strings.Builder
	start := 0
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if pending.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if pending.Len() > 0 && strings.HasPrefix(line, "#") {
			continue // comments inside a continued instruction
		}
		if pending.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(line, "\\") {
			pending.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		pending.WriteString(line)
		full := strings.Join(strings.Fields(pending.String()), " ")
		pending.Reset()
		op, args, _ := strings.Cut(full, " ")
		ins := Instruction{Line: start, Op: strings.ToUpper(op), Args: args}
		if ins.Op == "FROM" {
			fields := strings.Fields(args)
			st := Stage{From: fields[0]}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				st.Name = fields[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) > 0 {
			stages[len(stages)-1].Instructions = append(stages[len(stages)-1].Instructions, ins)
		}
	}
	return stages
}

func (s Stage) ops(op string) []Instruction {
	var out []Instruction
	for _, ins := range s.Instructions {
		if ins.Op == op {
			out = append(out, ins)
		}
	}
	return out
}

func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(RepoRoot(), "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages := ParseDockerfile(string(data))
	if len(stages) != 2 {
		t.Fatalf("deploy/Dockerfile: want two stages (build, runtime), got %d", len(stages))
	}
	builder, runner := stages[0], stages[1]
	if builder.From != "debian:bookworm" {
		t.Errorf("the build stage starts FROM %s; the project builds on Debian 12, debian:bookworm", builder.From)
	}
	if runner.From != "debian:bookworm-slim" && runner.From != "debian:bookworm" {
		t.Errorf("the runtime stage starts FROM %s; it must be bookworm to run what bookworm built", runner.From)
	}

	// The build stage runs exactly the project's set-up script, its Bazel
	// build of the server with the repository's .bazelrc (no extra flags),
	// and the collection script, in that order. Anything else would build
	// something CI did not test.
	want := []string{
		"bash tools/setup.sh",
		"bazel build //service:furrballs_server",
		"bash deploy/image_runtime.sh bazel-bin/service/furrballs_server /out",
	}
	runs := builder.ops("RUN")
	if len(runs) != len(want) {
		t.Errorf("the build stage has %d RUN steps, want %d: %q", len(runs), len(want), want)
	}
	for i := 0; i < len(runs) && i < len(want); i++ {
		if runs[i].Args != want[i] {
			t.Errorf("deploy/Dockerfile:%d: RUN %s; want RUN %s", runs[i].Line, runs[i].Args, want[i])
		}
	}
	// Those commands are the project's: the scripts exist, setup.sh is the
	// one the CI entry point runs (through tools/test.sh), and the server
	// target is the one in service/BUILD.
	for _, path := range []string{"tools/setup.sh", "deploy/image_runtime.sh", ".ci/run"} {
		if _, err := os.Stat(filepath.Join(RepoRoot(), path)); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	testSh, _ := os.ReadFile(filepath.Join(RepoRoot(), "tools", "test.sh"))
	if !strings.Contains(string(testSh), "bash tools/setup.sh") {
		t.Errorf("tools/test.sh no longer runs 'bash tools/setup.sh'; the image must set up the way CI does")
	}
	serviceBuild, _ := os.ReadFile(filepath.Join(RepoRoot(), "service", "BUILD"))
	if !strings.Contains(string(serviceBuild), `name = "furrballs_server"`) {
		t.Errorf("service/BUILD has no furrballs_server target")
	}
	for _, copy := range builder.ops("COPY") {
		if strings.Contains(copy.Args, "--from=") && !strings.Contains(copy.Args, "/usr/local/go") {
			t.Errorf("deploy/Dockerfile:%d: the build stage copies %q from another image; only the Go toolchain may come that way", copy.Line, copy.Args)
		}
	}

	// The runtime stage agrees with the manifests and the server.
	objs := build(t, "deploy/k8s/base")
	sts := objs.StatefulSets[0]
	pod := sts.Spec.Template.Spec
	c := pod.Containers[0]
	flags := serverFlags(t)
	effective, _ := effectiveFlags(t, objs, &c, &pod, flags)

	users := runner.ops("USER")
	if len(users) != 1 {
		t.Fatalf("the runtime stage needs one USER instruction, has %d", len(users))
	}
	uid, _, _ := strings.Cut(users[0].Args, ":")
	if n, err := strconv.ParseInt(uid, 10, 64); err != nil || n == 0 {
		t.Errorf("USER %s: must be a numeric non-root uid (runAsNonRoot cannot check a name)", users[0].Args)
	} else if pod.SecurityContext.RunAsUser == nil || *pod.SecurityContext.RunAsUser != n {
		t.Errorf("USER %d but the pod runs as %v", n, pod.SecurityContext.RunAsUser)
	}

	var exposed []string
	for _, e := range runner.ops("EXPOSE") {
		exposed = append(exposed, strings.Fields(e.Args)...)
	}
	for _, name := range []string{"listen_address", "metrics_address"} {
		_, port := hostPort(t, name, effective[name])
		found := false
		for _, e := range exposed {
			found = found || e == strconv.Itoa(int(port)) || e == strconv.Itoa(int(port))+"/tcp"
		}
		if !found {
			t.Errorf("EXPOSE %v lacks --%s's port %d", exposed, name, port)
		}
	}

	volumes := runner.ops("VOLUME")
	if len(volumes) != 1 || strings.Trim(volumes[0].Args, `[]" `) != effective["data_dir"] {
		t.Errorf("VOLUME %v; want the data directory %s", volumes, effective["data_dir"])
	}

	entry := runner.ops("ENTRYPOINT")
	if len(entry) != 1 || !strings.Contains(entry[0].Args, `"`+c.Command[0]+`"`) {
		t.Errorf("ENTRYPOINT %v; the StatefulSet runs %s", entry, c.Command[0])
	}
	installed := false
	for _, copy := range runner.ops("COPY") {
		installed = installed || strings.HasSuffix(copy.Args, " "+c.Command[0])
	}
	if !installed {
		t.Errorf("the runtime stage copies no server to %s", c.Command[0])
	}

	for _, env := range runner.ops("ENV") {
		for _, field := range strings.Fields(env.Args) {
			name, _, _ := strings.Cut(field, "=")
			flag, ok := strings.CutPrefix(name, "FURRBALLS_")
			if !ok {
				continue
			}
			flag = strings.ToLower(flag)
			if _, defined := flags[flag]; !defined {
				if _, landing := flagsLanding[flag]; !landing {
					t.Errorf("ENV %s names no server flag", name)
				}
			}
		}
	}

	ignore, err := os.ReadFile(filepath.Join(RepoRoot(), "deploy", "Dockerfile.dockerignore"))
	if err != nil || !strings.Contains(string(ignore), "bazel-*") {
		t.Errorf("deploy/Dockerfile.dockerignore must keep Bazel's output symlinks (bazel-*) out of the context")
	}
}

// The collection step of the image, run on the built server: the binary is
// copied, and every package it names is a real installed Debian package
// that owns a library of the server (so apt-get can install it in the
// runtime stage).
func TestImageRuntimeCollection(t *testing.T) {
	server := os.Getenv("FURRBALLS_SERVER")
	if server == "" {
		t.Skip("FURRBALLS_SERVER is not set; tools/test.sh sets it to the built //service:furrballs_server")
	}
	out := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(RepoRoot(), "deploy", "image_runtime.sh"), server, out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("image_runtime.sh: %v\n%s", err, b)
	}
	if st, err := os.Stat(filepath.Join(out, "furrballs_server")); err != nil || st.Mode()&0o111 == 0 {
		t.Errorf("image_runtime.sh did not install an executable server: %v", err)
	}
	list, err := os.ReadFile(filepath.Join(out, "runtime-packages.txt"))
	if err != nil {
		t.Fatal(err)
	}
	packages := strings.Fields(string(list))
	t.Logf("runtime packages: %s", strings.Join(packages, " "))
	hasPrometheus := false
	for _, p := range packages {
		if p == "libc6" {
			t.Errorf("libc6 is in the base image and must not be listed")
		}
		// gRPC, protobuf, RocksDB, OpenSSL and Abseil are linked from their
		// archives (docs/build.md, "How the server links"); prometheus-cpp
		// has none in Debian and is loaded at run time.
		hasPrometheus = hasPrometheus || strings.HasPrefix(p, "libprometheus-cpp-pull")
		if strings.HasPrefix(p, "libgrpc") || strings.HasPrefix(p, "librocksdb") ||
			strings.HasPrefix(p, "libprotobuf") || strings.HasPrefix(p, "libabsl") {
			t.Errorf("%s is listed, but the server links that library statically", p)
		}
		status, err := exec.Command("dpkg-query", "-W", "-f=${Status}", p).Output()
		if err != nil || !strings.Contains(string(status), "install ok installed") {
			t.Errorf("%s is not an installed Debian package (%q)", p, status)
		}
	}
	if !hasPrometheus {
		t.Errorf("no libprometheus-cpp-pull package among %v; the server loads prometheus-cpp", packages)
	}
}
