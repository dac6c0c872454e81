package deploy

// Builds every kustomization in deploy/ with kustomize's own library,
// decodes every object strictly into the Kubernetes API types (an unknown or
// misspelt field fails), and checks the deployment against the server:
// Guaranteed QoS, probes on grpc.health.v1 at the health port, ports, flag
// names and values, shutdown timing, security context, TLS and tokens from
// Secrets (security_test.go), spreading, and the monitoring ConfigMaps
// against their source files.
//
// Run: cd tests/deploy && go test ./...   (FURRBALLS_SERVER=<furrballs_server>
// adds the checks that need the built server; tools/test.sh sets it).

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The kustomizations an operator applies (deploy/README.md) and the
// examples that add the Prometheus Operator component, and the cert-manager
// and mTLS components, to an overlay.
var furrballsBuilds = []string{
	"deploy/k8s/base",
	"deploy/k8s/overlays/per-numa-node",
	"deploy/k8s/overlays/per-host",
	"tests/deploy/testdata/with-operator",
	"tests/deploy/testdata/with-cert-manager",
}

const monitoringBuild = "deploy"

// The health service names the server registers (service/server.cc): ""
// for the whole server and the Cache service's full name.
var healthServices = map[string]bool{"": true, "furrballs.v1.Cache": true}

// Flags the deployment sets that another change is adding to the server
// right now. While service/main.cc does not define one, its FURRBALLS_<NAME>
// variable is ignored by the server (it applies only variables of flags it
// defines) and the test logs that instead of failing. Remove an entry once
// the flag has landed.
var flagsLanding = map[string]string{
	"data_dir": "the spill tier's directory (RocksDB)",
}

// processHeadroom is what the process needs beside the cache (gRPC buffers,
// RocksDB's block cache, stacks); the cache's own memory, metadata included,
// is --memory_mb (engine/furrball/memory_plan.h), which
// TestFlagFilesStartTheServer checks against the built server's start-up
// report.
const processHeadroom = 512 << 20

// Objects is one kustomize build, decoded.
type Objects struct {
	Dir          string
	ConfigMaps   map[string]*corev1.ConfigMap
	Services     []*corev1.Service
	StatefulSets []*appsv1.StatefulSet
	PDBs         []*policyv1.PodDisruptionBudget
	PodMonitors  []*monitoringv1.PodMonitor
	Certificates []*certmanagerv1.Certificate
	Issuers      []*certmanagerv1.Issuer
}

// strict decodes YAML into out and fails on unknown or duplicate fields.
func strict(data []byte, out any) error {
	return yaml.UnmarshalStrict(data, out)
}

func build(t *testing.T, dir string) *Objects {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resources, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(RepoRoot(), dir))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	objs := &Objects{Dir: dir, ConfigMaps: map[string]*corev1.ConfigMap{}}
	for _, r := range resources.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			t.Fatalf("%s: %s: %v", dir, r.CurId(), err)
		}
		gvk := r.GetGvk()
		where := fmt.Sprintf("%s: %s/%s %s", dir, gvk.ApiVersion(), gvk.Kind, r.GetName())
		var decodeErr error
		switch gvk.ApiVersion() + " " + gvk.Kind {
		case "v1 ConfigMap":
			o := &corev1.ConfigMap{}
			decodeErr = strict(data, o)
			objs.ConfigMaps[o.Name] = o
		case "v1 Service":
			o := &corev1.Service{}
			decodeErr = strict(data, o)
			objs.Services = append(objs.Services, o)
		case "apps/v1 StatefulSet":
			o := &appsv1.StatefulSet{}
			decodeErr = strict(data, o)
			objs.StatefulSets = append(objs.StatefulSets, o)
		case "policy/v1 PodDisruptionBudget":
			o := &policyv1.PodDisruptionBudget{}
			decodeErr = strict(data, o)
			objs.PDBs = append(objs.PDBs, o)
		case "monitoring.coreos.com/v1 PodMonitor":
			o := &monitoringv1.PodMonitor{}
			decodeErr = strict(data, o)
			objs.PodMonitors = append(objs.PodMonitors, o)
		case "cert-manager.io/v1 Certificate":
			o := &certmanagerv1.Certificate{}
			decodeErr = strict(data, o)
			objs.Certificates = append(objs.Certificates, o)
		case "cert-manager.io/v1 Issuer":
			o := &certmanagerv1.Issuer{}
			decodeErr = strict(data, o)
			objs.Issuers = append(objs.Issuers, o)
		default:
			t.Errorf("%s: a kind this test does not know; add it so that it is decoded strictly", where)
			continue
		}
		if decodeErr != nil {
			t.Errorf("%s does not decode strictly: %v", where, decodeErr)
		}
	}
	return objs
}

// serverFlags: what service/main.cc defines, cross-checked with the built
// server's --helpfull when FURRBALLS_SERVER names one.
func serverFlags(t *testing.T) map[string]ServerFlag {
	t.Helper()
	flags, err := ParseServerFlags(filepath.Join(RepoRoot(), "service", "main.cc"))
	if err != nil {
		t.Fatal(err)
	}
	server := os.Getenv("FURRBALLS_SERVER")
	if server == "" {
		return flags
	}
	help, err := HelpFlags(server)
	if err != nil {
		t.Fatal(err)
	}
	for name := range flags {
		if _, ok := help[name]; !ok {
			t.Errorf("service/main.cc defines --%s but %s --helpfull does not list it (stale binary?)", name, server)
		}
	}
	for name, def := range help {
		f, ok := flags[name]
		if !ok {
			t.Errorf("%s lists --%s, which service/main.cc does not define", server, name)
			continue
		}
		f.Default = def // the binary's rendering of the default, e.g. 1048576
		flags[name] = f
	}
	return flags
}

// parseFlagFile reads "--name=value" lines (what absl's --flagfile takes).
func parseFlagFile(t *testing.T, where, text string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "--"), "=")
		if !strings.HasPrefix(line, "--") || !ok {
			t.Errorf("%s line %d: %q is not --name=value", where, i+1, line)
			continue
		}
		if _, dup := out[name]; dup {
			t.Errorf("%s: --%s appears twice", where, name)
		}
		out[name] = value
	}
	return out
}

// checkFlagValue: the value parses as the flag's C++ type (an optional
// flag also takes the empty value, which leaves it unset).
func checkFlagValue(f ServerFlag, value string) error {
	if inner, ok := strings.CutPrefix(f.Type, "std::optional<"); ok {
		if value == "" {
			return nil
		}
		f.Type = strings.TrimSuffix(inner, ">")
	}
	switch f.Type {
	case "uint64_t", "uint32_t":
		_, err := strconv.ParseUint(value, 10, 64)
		return err
	case "int":
		_, err := strconv.ParseInt(value, 10, 32)
		return err
	case "bool":
		_, err := strconv.ParseBool(value)
		return err
	}
	return nil
}

func hostPort(t *testing.T, what, address string) (string, int32) {
	t.Helper()
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		t.Fatalf("%s=%q: %v", what, address, err)
	}
	p, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		t.Fatalf("%s=%q: bad port", what, address)
	}
	return host, int32(p)
}

// effectiveFlags: the server's defaults, overridden by the flag file the
// pod passes with --flagfile, overridden by the container's own arguments.
// Below both: literal FURRBALLS_<NAME> variables of the container.
func effectiveFlags(t *testing.T, objs *Objects, c *corev1.Container, pod *corev1.PodSpec, flags map[string]ServerFlag) (map[string]string, map[string]string) {
	t.Helper()
	effective := map[string]string{}
	for name, f := range flags {
		effective[name] = f.Default
	}
	for _, e := range c.Env {
		if name, ok := strings.CutPrefix(e.Name, "FURRBALLS_"); ok && e.ValueFrom == nil {
			effective[strings.ToLower(name)] = e.Value
		}
	}
	fromFile := map[string]string{}
	for _, arg := range append(append([]string{}, c.Command[1:]...), c.Args...) {
		path, ok := strings.CutPrefix(arg, "--flagfile=")
		if !ok {
			continue
		}
		dir, key := filepath.Split(path)
		cm := configMapMountedAt(t, objs, c, pod, filepath.Clean(dir))
		text, ok := cm.Data[key]
		if !ok {
			t.Fatalf("%s: --flagfile=%s but ConfigMap %s has no key %q", objs.Dir, path, cm.Name, key)
		}
		fromFile = parseFlagFile(t, objs.Dir+": ConfigMap "+cm.Name, text)
	}
	if len(fromFile) == 0 {
		t.Fatalf("%s: the container passes no --flagfile from the flags ConfigMap", objs.Dir)
	}
	for name, value := range fromFile {
		effective[name] = value
	}
	for _, arg := range append(append([]string{}, c.Command[1:]...), c.Args...) {
		if strings.HasPrefix(arg, "--flagfile=") {
			continue
		}
		name, value, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		effective[name] = value
	}
	return effective, fromFile
}

func configMapMountedAt(t *testing.T, objs *Objects, c *corev1.Container, pod *corev1.PodSpec, dir string) *corev1.ConfigMap {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if filepath.Clean(m.MountPath) != dir {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				cm, ok := objs.ConfigMaps[v.ConfigMap.Name]
				if !ok {
					t.Fatalf("%s: volume %s names ConfigMap %s, which the build does not contain", objs.Dir, v.Name, v.ConfigMap.Name)
				}
				return cm
			}
		}
	}
	t.Fatalf("%s: no ConfigMap volume is mounted at %s", objs.Dir, dir)
	return nil
}

func containerPort(c *corev1.Container, name string) (int32, bool) {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

// checkGuaranteed applies the kubelet's QoS rule: every container has CPU
// and memory limits and requests equal to them (absent requests default to
// the limits). The static CPU Manager additionally needs integer CPUs.
func checkGuaranteed(t *testing.T, where string, pod *corev1.PodSpec) {
	t.Helper()
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			limit, ok := c.Resources.Limits[r]
			if !ok || limit.IsZero() {
				t.Errorf("%s: container %s has no %s limit: not Guaranteed QoS", where, c.Name, r)
				continue
			}
			if req, ok := c.Resources.Requests[r]; ok && req.Cmp(limit) != 0 {
				t.Errorf("%s: container %s requests %s %s but its limit is %s: not Guaranteed QoS", where, c.Name, r, req.String(), limit.String())
			}
		}
		if cpu, ok := c.Resources.Limits[corev1.ResourceCPU]; ok && cpu.MilliValue()%1000 != 0 {
			t.Errorf("%s: container %s asks for %s CPUs; the static CPU Manager gives exclusive CPUs only for integers", where, c.Name, cpu.String())
		}
	}
}

func checkProbe(t *testing.T, where, kind string, p *corev1.Probe, healthPort int32) {
	t.Helper()
	if p == nil {
		t.Errorf("%s: no %s probe", where, kind)
		return
	}
	if p.GRPC == nil {
		t.Errorf("%s: the %s probe is not a gRPC health probe", where, kind)
		return
	}
	if p.GRPC.Port != healthPort {
		t.Errorf("%s: the %s probe checks port %d but the server serves health on %d", where, kind, p.GRPC.Port, healthPort)
	}
	service := ""
	if p.GRPC.Service != nil {
		service = *p.GRPC.Service
	}
	if !healthServices[service] {
		t.Errorf("%s: the %s probe asks grpc.health.v1 about %q, which the server does not register", where, kind, service)
	}
}

func selects(selector map[string]string, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestFurrballsBuilds(t *testing.T) {
	flags := serverFlags(t)
	for _, dir := range furrballsBuilds {
		t.Run(strings.ReplaceAll(dir, "/", "_"), func(t *testing.T) {
			checkFurrballsBuild(t, build(t, dir), flags)
		})
	}
}

func checkFurrballsBuild(t *testing.T, objs *Objects, flags map[string]ServerFlag) {
	dir := objs.Dir
	if len(objs.StatefulSets) != 1 || len(objs.Services) != 1 || len(objs.PDBs) != 1 {
		t.Fatalf("%s: want one StatefulSet, Service and PodDisruptionBudget; got %d, %d, %d",
			dir, len(objs.StatefulSets), len(objs.Services), len(objs.PDBs))
	}
	sts, svc, pdb := objs.StatefulSets[0], objs.Services[0], objs.PDBs[0]
	pod := &sts.Spec.Template.Spec
	podLabels := sts.Spec.Template.Labels
	if len(pod.Containers) != 1 {
		t.Fatalf("%s: want one container, got %d", dir, len(pod.Containers))
	}
	c := &pod.Containers[0]
	where := dir + ": container " + c.Name

	checkGuaranteed(t, dir, pod)

	// Flags: names the server defines, values of the right type, and the
	// values the rest of the manifest depends on.
	if len(c.Command) == 0 {
		t.Fatalf("%s: no command", where)
	}
	effective, fromFile := effectiveFlags(t, objs, c, pod, flags)
	for name, value := range fromFile {
		f, ok := flags[name]
		if !ok {
			t.Errorf("%s: the flag file sets --%s, which the server does not define", dir, name)
			continue
		}
		if err := checkFlagValue(f, value); err != nil {
			t.Errorf("%s: --%s=%s is not a valid %s: %v", dir, name, value, f.Type, err)
		}
	}
	for _, e := range c.Env {
		name, ok := strings.CutPrefix(e.Name, "FURRBALLS_")
		if !ok {
			continue
		}
		flag := strings.ToLower(name)
		if _, ok := flags[flag]; !ok {
			if why, landing := flagsLanding[flag]; landing {
				t.Logf("%s: %s: --%s (%s) is not in service/main.cc yet; the server ignores the variable until it is", where, e.Name, flag, why)
			} else {
				t.Errorf("%s: %s names no server flag", where, e.Name)
			}
		}
		if _, ok := fromFile[flag]; ok {
			t.Errorf("%s: %s is overridden by the flag file's --%s (flag file > environment)", where, e.Name, flag)
		}
	}

	listenHost, grpcPort := hostPort(t, "--listen_address", effective["listen_address"])
	if ip := net.ParseIP(listenHost); listenHost == "localhost" || (ip != nil && ip.IsLoopback()) {
		t.Errorf("%s: --listen_address=%s serves loopback only; a pod must listen on 0.0.0.0", dir, effective["listen_address"])
	}
	metricsHost, metricsPort := hostPort(t, "--metrics_address", effective["metrics_address"])
	if ip := net.ParseIP(metricsHost); metricsHost == "localhost" || (ip != nil && ip.IsLoopback()) {
		t.Errorf("%s: --metrics_address=%s cannot be scraped from another pod", dir, effective["metrics_address"])
	}
	if p, ok := containerPort(c, "grpc"); !ok || p != grpcPort {
		t.Errorf("%s: container port grpc is %d, the server listens on %d", where, p, grpcPort)
	}
	if p, ok := containerPort(c, "metrics"); !ok || p != metricsPort {
		t.Errorf("%s: container port metrics is %d, the server serves metrics on %d", where, p, metricsPort)
	}
	if got := sts.Spec.Template.Annotations["prometheus.io/port"]; got != strconv.Itoa(int(metricsPort)) {
		t.Errorf("%s: annotation prometheus.io/port=%q, metrics are on %d", dir, got, metricsPort)
	}
	if sts.Spec.Template.Annotations["prometheus.io/scrape"] != "true" {
		t.Errorf("%s: pods are not annotated prometheus.io/scrape=true", dir)
	}

	// Probes go to the plaintext health listener when there is one: the
	// kubelet's gRPC probe cannot do TLS.
	probePort := grpcPort
	if address := effective["health_address"]; address != "" {
		_, probePort = hostPort(t, "--health_address", address)
		if p, ok := containerPort(c, "health"); !ok || p != probePort {
			t.Errorf("%s: container port health is %d, the server serves health on %d", where, p, probePort)
		}
	} else if effective["tls_cert_file"] != "" {
		t.Errorf("%s: the gRPC port serves TLS, which the kubelet's gRPC probes cannot speak; set --health_address and probe it", dir)
	}
	checkProbe(t, where, "startup", c.StartupProbe, probePort)
	checkProbe(t, where, "readiness", c.ReadinessProbe, probePort)
	checkProbe(t, where, "liveness", c.LivenessProbe, probePort)
	checkSecurity(t, objs, c, pod, effective)
	if c.ReadinessProbe != nil && c.ReadinessProbe.GRPC != nil &&
		(c.ReadinessProbe.GRPC.Service == nil || *c.ReadinessProbe.GRPC.Service != "furrballs.v1.Cache") {
		t.Errorf("%s: readiness must ask about furrballs.v1.Cache, the service that drains on SIGTERM", where)
	}

	// Memory: the budget (everything the cache maps) plus the process must
	// fit the limit, or the kernel kills the pod when the cache fills.
	memoryMB, err := strconv.ParseUint(effective["memory_mb"], 10, 64)
	if err != nil {
		t.Fatalf("%s: --memory_mb=%q", dir, effective["memory_mb"])
	}
	need := memoryMB<<20 + processHeadroom
	limit := c.Resources.Limits[corev1.ResourceMemory]
	if uint64(limit.Value()) < need {
		t.Errorf("%s: memory limit %s < --memory_mb=%d MiB + %d MiB = %d MiB",
			dir, limit.String(), memoryMB, processHeadroom>>20, need>>20)
	}

	// Shutdown: the grace period covers the preStop hook, the drain and the
	// in-flight deadline, with time left to flush and exit.
	drainMS, _ := strconv.ParseUint(effective["shutdown_drain_ms"], 10, 64)
	deadlineMS, _ := strconv.ParseUint(effective["shutdown_deadline_ms"], 10, 64)
	var preStop int64
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		preStop = c.Lifecycle.PreStop.Sleep.Seconds
	}
	if preStop == 0 {
		t.Errorf("%s: no preStop sleep; clients would still be sending to a pod that drains", where)
	}
	if drainMS == 0 {
		t.Errorf("%s: --shutdown_drain_ms=0: readiness never reports NOT_SERVING before connections close", dir)
	}
	needGrace := preStop + int64((drainMS+deadlineMS+999)/1000) + 5
	if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds < needGrace {
		t.Errorf("%s: terminationGracePeriodSeconds must be at least preStop %d s + --shutdown_drain_ms %d + --shutdown_deadline_ms %d + 5 s = %d s",
			dir, preStop, drainMS, deadlineMS, needGrace)
	}

	// Security: non-root, read-only root, a writable data volume at
	// --data_dir.
	psc, csc := pod.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("%s: the pod must run as a non-root user (runAsNonRoot, runAsUser != 0)", dir)
	}
	if csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
		t.Errorf("%s: the root filesystem must be read-only", where)
	}
	if csc == nil || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		t.Errorf("%s: allowPrivilegeEscalation must be false", where)
	}
	if csc == nil || csc.Capabilities == nil || len(csc.Capabilities.Drop) != 1 || csc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("%s: capabilities must drop ALL", where)
	}
	if csc != nil && csc.Capabilities != nil {
		for _, add := range csc.Capabilities.Add {
			if add != "SYS_NICE" {
				t.Errorf("%s: adds capability %s; only SYS_NICE (memory policy under the default seccomp profile) is expected", where, add)
			}
		}
	}
	dataDir, ok := effective["data_dir"]
	if !ok || dataDir == "" {
		t.Errorf("%s: --data_dir is not set", dir)
	}
	if !writableVolumeAt(sts, c, dataDir) {
		t.Errorf("%s: --data_dir=%s is not a writable volume mount backed by a volumeClaimTemplate", dir, dataDir)
	}

	// Identity and selection: the headless Service and the PDB select the
	// pods, DNS names come from the Service the StatefulSet names.
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("%s: Service %s is not headless (clusterIP: None)", dir, svc.Name)
	}
	if sts.Spec.ServiceName != svc.Name {
		t.Errorf("%s: StatefulSet serviceName %q != Service %q", dir, sts.Spec.ServiceName, svc.Name)
	}
	if !selects(svc.Spec.Selector, podLabels) {
		t.Errorf("%s: the Service selector %v does not select the pods %v", dir, svc.Spec.Selector, podLabels)
	}
	if sts.Spec.Selector == nil || !selects(sts.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("%s: the StatefulSet selector does not select its own pods", dir)
	}
	if pdb.Spec.Selector == nil || !selects(pdb.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("%s: the PodDisruptionBudget does not select the pods", dir)
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("%s: the PodDisruptionBudget should allow one pod down at a time", dir)
	}
	for _, sp := range svc.Spec.Ports {
		if _, ok := containerPort(c, sp.TargetPort.String()); !ok {
			t.Errorf("%s: Service port %s targets %q, which the container does not name", dir, sp.Name, sp.TargetPort.String())
		}
		want := map[string]int32{"grpc": grpcPort, "metrics": metricsPort}[sp.Name]
		if sp.Port != want {
			t.Errorf("%s: Service port %s is %d, want the server's %d", dir, sp.Name, sp.Port, want)
		}
	}

	// Spreading: anti-affinity on the host name (required for one pod per
	// host).
	required, preferred := antiAffinity(pod)
	switch {
	case strings.Contains(dir, "per-host"):
		if !required {
			t.Errorf("%s: one pod per host needs required anti-affinity on kubernetes.io/hostname", dir)
		}
		if pod.NodeSelector["furrballs.io/kubelet-topology"] != "restricted" {
			t.Errorf("%s: a pod spanning NUMA nodes must go to kubelets with topologyManagerPolicy restricted", dir)
		}
	case strings.Contains(dir, "per-numa-node"):
		if !preferred && !required {
			t.Errorf("%s: no anti-affinity on kubernetes.io/hostname", dir)
		}
		if pod.NodeSelector["furrballs.io/kubelet-topology"] != "single-numa-node" {
			t.Errorf("%s: pods must go to kubelets with topologyManagerPolicy single-numa-node", dir)
		}
	default:
		if !preferred && !required {
			t.Errorf("%s: no anti-affinity on kubernetes.io/hostname", dir)
		}
	}

	// The Prometheus Operator's PodMonitor, where the build has one.
	for _, pm := range objs.PodMonitors {
		if !selects(pm.Spec.Selector.MatchLabels, podLabels) {
			t.Errorf("%s: PodMonitor %s does not select the pods", dir, pm.Name)
		}
		// The alert rules and the dashboard select job="furrballs".
		if podLabels[pm.Spec.JobLabel] != "furrballs" {
			t.Errorf("%s: PodMonitor jobLabel %q gives job=%q; the alerts select job=\"furrballs\"", dir, pm.Spec.JobLabel, podLabels[pm.Spec.JobLabel])
		}
		for _, ep := range pm.Spec.PodMetricsEndpoints {
			if ep.Port == nil {
				t.Errorf("%s: PodMonitor endpoint without a port name", dir)
			} else if p, ok := containerPort(c, *ep.Port); !ok || p != metricsPort {
				t.Errorf("%s: PodMonitor scrapes port %q, not the metrics port %d", dir, *ep.Port, metricsPort)
			}
		}
	}
	if strings.Contains(dir, "with-operator") && len(objs.PodMonitors) != 1 {
		t.Errorf("%s: want one PodMonitor, got %d", dir, len(objs.PodMonitors))
	}
}

func writableVolumeAt(sts *appsv1.StatefulSet, c *corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if filepath.Clean(m.MountPath) != filepath.Clean(path) || m.ReadOnly {
			continue
		}
		for _, claim := range sts.Spec.VolumeClaimTemplates {
			if claim.Name == m.Name {
				return true
			}
		}
	}
	return false
}

func antiAffinity(pod *corev1.PodSpec) (required, preferred bool) {
	if pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil {
		return false, false
	}
	a := pod.Affinity.PodAntiAffinity
	for _, term := range a.RequiredDuringSchedulingIgnoredDuringExecution {
		required = required || term.TopologyKey == "kubernetes.io/hostname"
	}
	for _, w := range a.PreferredDuringSchedulingIgnoredDuringExecution {
		preferred = preferred || w.PodAffinityTerm.TopologyKey == "kubernetes.io/hostname"
	}
	return required, preferred
}

// The monitoring ConfigMaps carry the alert rules and the dashboard byte for
// byte: the files in deploy/prometheus and deploy/grafana stay the single
// source.
func TestMonitoringConfigMaps(t *testing.T) {
	objs := build(t, monitoringBuild)
	for name, source := range map[string]string{
		"furrballs-prometheus-rules":  "deploy/prometheus/alerts.yml",
		"furrballs-grafana-dashboard": "deploy/grafana/furrballs.json",
	} {
		cm, ok := objs.ConfigMaps[name]
		if !ok {
			t.Errorf("%s: no ConfigMap %s", monitoringBuild, name)
			continue
		}
		want, err := os.ReadFile(filepath.Join(RepoRoot(), source))
		if err != nil {
			t.Fatal(err)
		}
		key := filepath.Base(source)
		if cm.Data[key] != string(want) {
			t.Errorf("ConfigMap %s key %s differs from %s", name, key, source)
		}
	}
	if cm := objs.ConfigMaps["furrballs-grafana-dashboard"]; cm != nil && cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard ConfigMap lacks the label grafana_dashboard=1 that Grafana's sidecar loads")
	}
}

// The kubelet examples decode strictly into the kubelet's configuration
// type and say what the overlays rely on.
func TestKubeletConfigs(t *testing.T) {
	for file, policy := range map[string]string{
		"deploy/kubelet/kubelet-config.yaml":          "single-numa-node",
		"deploy/kubelet/kubelet-config-per-host.yaml": "restricted",
	} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(RepoRoot(), file))
			if err != nil {
				t.Fatal(err)
			}
			var kc kubeletv1beta1.KubeletConfiguration
			if err := strict(data, &kc); err != nil {
				t.Fatalf("%s does not decode strictly: %v", file, err)
			}
			if kc.Kind != "KubeletConfiguration" || kc.APIVersion != "kubelet.config.k8s.io/v1beta1" {
				t.Errorf("%s: kind %q apiVersion %q", file, kc.Kind, kc.APIVersion)
			}
			if kc.CPUManagerPolicy != "static" || kc.MemoryManagerPolicy != "Static" {
				t.Errorf("%s: cpuManagerPolicy %q, memoryManagerPolicy %q; both static managers are needed", file, kc.CPUManagerPolicy, kc.MemoryManagerPolicy)
			}
			if kc.TopologyManagerPolicy != policy || kc.TopologyManagerScope != "pod" {
				t.Errorf("%s: topologyManagerPolicy %q scope %q, want %q at pod scope", file, kc.TopologyManagerPolicy, kc.TopologyManagerScope, policy)
			}
			if kc.ReservedSystemCPUs == "" {
				t.Errorf("%s: the static CPU Manager needs reserved CPUs", file)
			}
			// The kubelet refuses to start unless reservedMemory adds up to
			// kubeReserved + systemReserved + the hard eviction threshold.
			var reserved resource.Quantity
			for _, r := range kc.ReservedMemory {
				reserved.Add(r.Limits[corev1.ResourceMemory])
			}
			var want resource.Quantity
			for _, s := range []string{kc.KubeReserved["memory"], kc.SystemReserved["memory"], kc.EvictionHard["memory.available"]} {
				if s != "" {
					want.Add(resource.MustParse(s))
				}
			}
			if reserved.Cmp(want) != 0 {
				t.Errorf("%s: reservedMemory adds up to %s, kubeReserved + systemReserved + evictionHard to %s", file, reserved.String(), want.String())
			}
		})
	}
}

// The reference host of deploy/README.md and the kubelet examples: two NUMA
// nodes, each 16 cores with SMT (node 0: CPUs 0-15 and siblings 32-47,
// node 1: 16-31 and 48-63) and 64 GiB.
var referenceNodeCPUs = [][]int{
	append(idRange(0, 15), idRange(32, 47)...),
	append(idRange(16, 31), idRange(48, 63)...),
}

const referenceNodeMemory = 64 << 30

func idRange(first, last int) []int {
	var ids []int
	for id := first; id <= last; id++ {
		ids = append(ids, id)
	}
	return ids
}

// On the reference host, with the kubelet example's reservations, a
// per-numa-node pod fits one NUMA node exactly once (so the layout really is
// one pod per node) and a per-host pod needs both nodes and fits the host
// once; CPU counts are whole cores (full-pcpus-only).
func TestReferenceHostSizing(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(RepoRoot(), "deploy/kubelet/kubelet-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kc kubeletv1beta1.KubeletConfiguration
	if err := strict(data, &kc); err != nil {
		t.Fatal(err)
	}
	reserved := map[int]bool{}
	for _, part := range strings.Split(kc.ReservedSystemCPUs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			t.Fatalf("reservedSystemCPUs %q: write single CPUs for this test", kc.ReservedSystemCPUs)
		}
		reserved[n] = true
	}
	var nodeCPUs [2]int64
	var nodeMemory [2]int64
	for node, cpus := range referenceNodeCPUs {
		for _, cpu := range cpus {
			if !reserved[cpu] {
				nodeCPUs[node]++
			}
		}
		nodeMemory[node] = referenceNodeMemory
		for _, r := range kc.ReservedMemory {
			if int(r.NumaNode) == node {
				q := r.Limits[corev1.ResourceMemory]
				nodeMemory[node] -= q.Value()
			}
		}
	}
	t.Logf("reference host allocatable per NUMA node: %v CPUs, %v bytes", nodeCPUs, nodeMemory)

	for _, dir := range []string{"deploy/k8s/overlays/per-numa-node", "deploy/k8s/overlays/per-host"} {
		objs := build(t, dir)
		limits := objs.StatefulSets[0].Spec.Template.Spec.Containers[0].Resources.Limits
		cpuQ, memQ := limits[corev1.ResourceCPU], limits[corev1.ResourceMemory]
		cpu, mem := cpuQ.Value(), memQ.Value()
		if cpu%2 != 0 {
			t.Errorf("%s: %d CPUs is not whole cores; full-pcpus-only rejects the pod", dir, cpu)
		}
		if strings.Contains(dir, "per-numa-node") {
			if cpu > nodeCPUs[0] || mem > nodeMemory[0] {
				t.Errorf("%s: %d CPUs / %s does not fit one NUMA node (%d CPUs, %d bytes)", dir, cpu, memQ.String(), nodeCPUs[0], nodeMemory[0])
			}
			if 2*cpu <= nodeCPUs[0] && 2*mem <= nodeMemory[0] {
				t.Errorf("%s: two pods fit one NUMA node; the layout would not be one pod per node", dir)
			}
		} else {
			if cpu <= nodeCPUs[0] && mem <= nodeMemory[0] {
				t.Errorf("%s: the pod fits one NUMA node; it would not span the host", dir)
			}
			if cpu > nodeCPUs[0]+nodeCPUs[1] || mem > nodeMemory[0]+nodeMemory[1] {
				t.Errorf("%s: %d CPUs / %s does not fit the host", dir, cpu, memQ.String())
			}
		}
	}
}
